"""Node leaders with real processes on "nodes" made of network namespaces on
one bridge (scripts/netns-hosts.sh star): 4 nodes of 3 ranks each, started by
hand as a node's ranks are (torchrun's variables, or srun's), GPUDIAG_TREE=on
and groups of 2 nodes, so every level is there: each node's local rank 0
serves its node's store and judges it, nodes 1 and 3 (0-based 0 and 2) also
judge their group, node 1 the root.
  - a healthy job: every rank OK, rank 0's table has all 12 ranks on 4 hosts;
  - node 3 alone with NCCL_ALGO set: named by the root's comparison across
    the groups, the job still OK;
  - node 3's leader killed at the exchange (it is also its group's judge):
    its two other ranks say they lost their node's leader, the root names
    the node's ranks missing, node 4 (whose group judge died with it)
    reports to the root instead, and every process ends."""
import os
import subprocess
import tempfile
import unittest

from harness import BIN, clean_env, raise_at, run, strip_prefix
from netns_nodes import on_nodes, run_nodes, star

NODES, PER_NODE = 4, 3
WORLD = NODES * PER_NODE


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class NodeLeadersOnNamespaceNodes(unittest.TestCase):
    PREFIX = "gtr"

    def setUp(self):
        star(self, self.PREFIX, NODES)
        self.dir = tempfile.mkdtemp()
        if not os.environ.get("GPUDIAG_KEEP_TREE_LOGS"):
            self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.dir]))

    def rank_env(self, rank, style):
        node, local = divmod(rank, PER_NODE)
        if style == "torchrun":
            return {"RANK": rank, "WORLD_SIZE": WORLD, "LOCAL_RANK": local,
                    "LOCAL_WORLD_SIZE": PER_NODE, "GROUP_RANK": node}
        return {"SLURM_JOB_ID": 4242, "SLURM_STEP_ID": 0, "SLURM_PROCID": rank,
                "SLURM_NTASKS": WORLD, "SLURM_LOCALID": local, "SLURM_NTASKS_PER_NODE": PER_NODE,
                "SLURM_NODEID": node, "SLURM_NNODES": NODES}

    def job(self, style, extra_env=None, node_env=None):
        """Starts every node's ranks by hand (node i's with node_env[i] too);
        returns {rank: (rc, output)}."""
        return run_nodes(self.PREFIX, NODES, PER_NODE, self.dir,
                         lambda r: self.rank_env(r, style),
                         dict(MASTER_ADDR="10.78.0.1", MASTER_PORT="29810", GPUDIAG_TREE="on",
                              GPUDIAG_TREE_GROUP_NODES="2", GPUDIAG_SECRET="t" * 32,
                              GPUDIAG_LOG_LEVEL="info", **(extra_env or {})),
                         node_env=node_env)

    def test_a_healthy_job_meets_through_every_level(self):
        ranks = self.job("torchrun")
        for r, (rc, out) in ranks.items():
            self.assertEqual(rc, 0, (r, out[-3000:]))
            self.assertIn(f"is OK (global rank: {r}/{WORLD})", out)
            node = r // PER_NODE
            self.assertIn(f"meeting the job through the leader of node {node} "
                          f"(ranks {node * PER_NODE}-{node * PER_NODE + 2}) (local rank 0)", out)
        text = strip_prefix(ranks[0][1])
        self.assertIn(f"summary: {WORLD}/{WORLD} ranks OK on {NODES} hosts", text)
        # The report's table has every rank's timings, not just rank 0's.
        rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
        self.assertEqual([row[0] for row in rows], [str(r) for r in range(WORLD)], text)
        for row in rows:
            self.assertEqual(row[-1], "OK", row)
            self.assertNotIn("-", row[4:9], row)
        self.assertIn("compared across all 2 groups of nodes", text)

    def test_a_node_on_another_setting_is_found_across_the_groups(self):
        # node3 (0-based 2, group 1) alone sets NCCL_ALGO: its group sees it,
        # and only the root's comparison across groups can say it differs
        # from the job (a warning: every rank is still OK).
        ranks = self.job("torchrun", node_env={2: {"NCCL_ALGO": "Tree"}})
        for r, (rc, out) in ranks.items():
            self.assertEqual(rc, 0, (r, out[-3000:]))
        text = strip_prefix(ranks[0][1])
        self.assertIn("compared across all 2 groups of nodes", text)
        self.assertIn("warning: NCCL_ALGO differs between ranks: ranks 0-5,9-11 [node1,node2,"
                      "node4]: unset; ranks 6-8 [node3]: NCCL_ALGO=Tree", text)
        self.assertIn("drift: node3 (ranks 6-8): NCCL_ALGO is Tree, not unset as on 9 other "
                      "ranks", text)

    def test_a_killed_leader_is_named_and_its_group_reports_to_the_root(self):
        # Rank 6 is local rank 0 of node3 (0-based node 2): its node's leader
        # and the judge of group 1 (nodes 2-3). srun's variables this time.
        ranks = self.job("srun", raise_at("SIGKILL@exchange:6"))
        self.assertEqual(ranks[6][0], 137, ranks[6][1][-2000:])
        for r in (7, 8):
            rc, out = ranks[r]
            self.assertNotEqual(rc, 0, out[-2000:])
            self.assertIn("the leader of node 2 (ranks 6-8)", out, (r, out[-3000:]))
        for r in (0, 1, 5, 9, 11):
            rc, out = ranks[r]
            self.assertNotEqual(rc, 0, (r, out[-2000:]))
            self.assertIn("rank 6 did not reach the exchange checkpoint", out, (r, out[-3000:]))
            self.assertIn("node 2 (ranks 6-8): its leader did not report", out, (r, out[-3000:]))
        # Node 3 (ranks 9-11) lost its group's judge with rank 6, and was heard
        # through the root: its ranks are not among the missing.
        summary = strip_prefix(ranks[0][1])
        self.assertIn("ranks 6-8 missing: ", summary, summary[-3000:])
        rows = {line.split()[0]: line for line in summary.splitlines() if line[:1].isdigit()}
        for r in (9, 10, 11):
            self.assertIn("node4", rows[str(r)], summary[-3000:])
            self.assertNotIn("MISSING", rows[str(r)], summary[-3000:])


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class LaunchLeadsOnNamespaceNodes(unittest.TestCase):
    """gpudiag launch on each of 3 nodes leads its node itself (3 ranks each,
    groups of 2 nodes): a healthy job, and a rank killed at the exchange
    whose death its launcher announces and every other rank names."""
    PREFIX = "gtl"
    NODES = 3

    def setUp(self):
        star(self, self.PREFIX, self.NODES)

    def launch(self, extra_env=None):
        outs = on_nodes(self.PREFIX, {
            i + 1: (f"hostname node{i + 1}; exec {BIN} launch --nnodes {self.NODES} --node-rank "
                    f"{i} --nproc-per-node 3 --master-addr 10.78.0.1 --master-port 29830 -- "
                    "check --backend host --timeout 10")
            for i in range(self.NODES)},
            dict(GPUDIAG_TREE="on", GPUDIAG_TREE_GROUP_NODES="2", GPUDIAG_SECRET="u" * 32,
                 GPUDIAG_LOG_LEVEL="info", **(extra_env or {})), timeout=240)
        return [outs[i + 1] for i in range(self.NODES)]

    def test_a_healthy_job_led_by_its_launchers(self):
        outs = self.launch()
        self.assertEqual([o[0] for o in outs], [0, 0, 0], outs[0][1][-3000:] + outs[0][2][-3000:])
        for i, (_, out, err) in enumerate(outs):
            self.assertIn(f"launch: leading node {i} (ranks {3 * i}-{3 * i + 2})", err)
            self.assertIn(f"meeting the job through the leader of node {i} (ranks {3 * i}-"
                          f"{3 * i + 2}) (gpudiag launch)", out + err)
        self.assertIn("summary: 9/9 ranks OK on 3 hosts", strip_prefix(outs[0][1]))

    def test_a_killed_rank_is_named_by_every_other_node(self):
        outs = self.launch(raise_at("SIGKILL@exchange:4"))
        self.assertEqual(outs[1][0], 137, outs[1][2][-2000:])
        for i in (0, 2):
            rc, out, err = outs[i]
            self.assertNotEqual(rc, 0, out[-2000:])
            self.assertIn("rank 4 [node2-1]", out, (i, out[-3000:]))
            self.assertIn("was killed by SIGKILL", out, (i, out[-3000:]))


    def test_a_rank_zero_that_never_arrives_is_named_by_every_other_rank(self):
        # Rank 0 stops before the exchange (its leader, the launcher, runs on):
        # the digest's missing list must carry rank 0 like any other rank, so
        # every rank of the other nodes names it in its own status line.
        outs = self.launch(raise_at("SIGSTOP@exchange:0"))
        for i in (1, 2):
            rc, out, err = outs[i]
            self.assertNotEqual(rc, 0, out[-2000:])
            lines = [l for l in strip_prefix(out).splitlines() if "is broken" in l]
            self.assertEqual(len(lines), 3, (i, out[-3000:]))
            for line in lines:  # named with where it runs, from its hello to its node's leader
                self.assertIn("rank 0 did not reach the exchange checkpoint", line, (i, line))
                self.assertIn("on node1 (local rank 0), last phase: exchange", line, (i, line))


class TreeSettings(unittest.TestCase):
    def test_bad_settings_are_one_line_and_exit_2(self):
        base = dict(clean_env(), RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT="29890")
        for extra, named in [({"GPUDIAG_TREE": "maybe"}, "GPUDIAG_TREE"),
                             ({"GPUDIAG_TREE": "on", "GPUDIAG_TREE_PORT": "99999"},
                              "GPUDIAG_TREE_PORT"),
                             ({"GPUDIAG_TREE": "on", "GPUDIAG_TREE_GROUP_NODES": "1"},
                              "GPUDIAG_TREE_GROUP_NODES")]:
            p = run([BIN, "check", "--backend", "host", "--timeout", "5"], env=dict(base, **extra),
                    timeout=60)
            self.assertEqual(p.returncode, 2, (extra, p.stdout, p.stderr))
            self.assertIn(named, p.stderr, extra)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_a_rank_whose_leader_never_starts_names_it(self):
        # Local rank 1 of a node whose local rank 0 never started.
        env = dict(clean_env(), RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT="29892", GPUDIAG_TREE="on")
        p = run([BIN, "check", "--backend", "host", "--timeout", "2"], env=env, timeout=60)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("cannot reach the leader of node 0 (ranks 0-1) (local rank 0 of this host",
                      p.stderr)


if __name__ == "__main__":
    unittest.main()
