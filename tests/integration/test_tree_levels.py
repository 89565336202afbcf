"""The tree of judges with a third level (supergroups of groups), forced at a
small size by a fan-out of a few children a judge:
  - the simulator (build/gpudiag-sim): 512 ranks, 2 a node, 8 children a
    judge: 256 nodes in 32 groups in 4 supergroups under the root, with a
    fault at every level (ranks missing, stopped and dead, a silent leader, a
    dead group judge, and a dead supergroup judge whose host takes its first
    group's judge and that group's first leader with it), every absent rank
    named by every rank still there; and a node on another driver named in
    every rank's report by the root's comparison across supergroups;
  - real processes on "nodes" made of network namespaces (as
    test_tree_nodes.py): 8 nodes of 2 ranks, GPUDIAG_TREE_GROUP_NODES=2, so 4
    groups in 2 supergroups under the root: a healthy job through every level,
    and the leader of node 4 killed at the exchange (it also judges group 2
    and supergroup 1): node 5 reports to the root past both lost judges,
    group 3's judge to the root past its lost supergroup, and every other
    rank names node 4's ranks, and rank 0's table has every other rank's
    row, read past the lost judges."""
import os
import re
import subprocess
import tempfile
import unittest

from harness import BUILD_DIR, raise_at, run, strip_prefix
from netns_nodes import run_nodes, star

SIM = os.path.join(BUILD_DIR, "gpudiag-sim")
LAST = re.compile(r"^sim: (?P<n>\d+) ranks, (?P<cps>\d+) checkpoints, (?P<s>[\d.]+) s, .*missing "
                  r"named: (?P<named>\d+)/(?P<of>\d+)$")


def sim(*args, timeout=120):
    p = run([SIM, *args], timeout=timeout)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p, LAST.match(last)


SMALL = ["--ranks", "512", "--per-node", "2", "--group-nodes", "8", "--timeout", "1"]


@unittest.skipUnless(os.path.exists(SIM), "gpudiag-sim not built")
class ThreeLevelsSimulated(unittest.TestCase):
    def test_a_fault_at_every_level_is_named_by_every_rank(self):
        # Ranks 1, 103, 205 missing, 307 stopped, 409 dead; node 129's leader
        # silent (ranks 258-259); node 8 (group 1's judge) and node 64
        # (supergroup 1's judge and group 8's) die after the communicator
        # checkpoint (ranks 16-17, 128-129): 11 ranks.
        p, m = sim(*SMALL, "--missing", "3", "--stop", "1", "--die", "1")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIsNotNone(m, p.stdout)
        self.assertEqual((m["n"], m["cps"], m["named"], m["of"]), ("512", "5", "11", "11"))
        self.assertIn("32 groups of 8 nodes, 2 levels of judges", p.stderr)

    def test_without_faults_above_the_ranks_only_the_ranks_are_named(self):
        p, m = sim(*SMALL, "--missing", "2", "--missing-leaders", "0", "--dead-judges", "0",
                   "--dead-upper-judges", "0")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertEqual((m["named"], m["of"]), ("2", "2"))

    def test_a_drifting_node_is_named_across_supergroups(self):
        # Node 200 (group 25, supergroup 3) on another driver: its supergroup
        # finds it among its groups, and the line reaches every rank through
        # the root's merge (a whole supergroup that differs is found only at
        # the root: tree_fingerprint_test.cpp).
        p, m = sim(*SMALL, "--drift-node", "200", "--missing", "1")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        seen = re.search(r'"drift: simnode200 \(ranks 400-401\)" in the report of (\d+)/(\d+) '
                         r"ranks at the exchange", p.stderr)
        self.assertIsNotNone(seen, p.stderr[-3000:])
        self.assertEqual(seen[1], seen[2])
        self.assertGreater(int(seen[2]), 500)


NODES, PER_NODE = 8, 2
WORLD = NODES * PER_NODE


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class ThreeLevelsOnNamespaceNodes(unittest.TestCase):
    PREFIX = "gt3"

    def setUp(self):
        star(self, self.PREFIX, NODES)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.dir]))

    def job(self, extra_env=None):
        """Starts every node's ranks by hand (torchrun's variables); returns
        {rank: (rc, output)}."""
        def rank_env(r):
            node, local = divmod(r, PER_NODE)
            return {"RANK": r, "WORLD_SIZE": WORLD, "LOCAL_RANK": local,
                    "LOCAL_WORLD_SIZE": PER_NODE, "GROUP_RANK": node}
        return run_nodes(self.PREFIX, NODES, PER_NODE, self.dir, rank_env,
                         dict(MASTER_ADDR="10.78.0.1", MASTER_PORT="29850", GPUDIAG_TREE="on",
                              GPUDIAG_TREE_GROUP_NODES="2", GPUDIAG_SECRET="v" * 32,
                              GPUDIAG_LOG_LEVEL="info", **(extra_env or {})),
                         timeout=300)

    def test_a_healthy_job_meets_through_three_levels(self):
        ranks = self.job()
        for r, (rc, out) in ranks.items():
            self.assertEqual(rc, 0, (r, out[-3000:]))
            self.assertIn(f"is OK (global rank: {r}/{WORLD})", out)
        text = strip_prefix(ranks[0][1])
        self.assertIn(f"summary: {WORLD}/{WORLD} ranks OK on {NODES} hosts", text)
        rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
        self.assertEqual([row[0] for row in rows], [str(r) for r in range(WORLD)], text)
        # Compared across every group, through the supergroups' merged summaries.
        self.assertIn("compared across all 4 groups of nodes", text)

    def test_a_killed_supergroup_judge_costs_its_own_node_only(self):
        # Rank 8 is local rank 0 of node 4 (0-based): node 4's leader and the
        # judges of group 2 (nodes 4-5) and supergroup 1 (groups 2-3).
        ranks = self.job(raise_at("SIGKILL@exchange:8"))
        self.assertEqual(ranks[8][0], 137, ranks[8][1][-2000:])
        for r in (0, 3, 6, 10, 11, 12, 15):
            rc, out = ranks[r]
            self.assertNotEqual(rc, 0, (r, out[-2000:]))
            self.assertIn("rank 8 did not reach the exchange checkpoint", out, (r, out[-3000:]))
            self.assertIn("node 4 (ranks 8-9): its leader did not report", out, (r, out[-3000:]))
        # Node 5 (ranks 10-11) lost both judges above it and was heard through
        # the root, nodes 6-7 through group 3's judge, which lost its
        # supergroup's: they named node 4 above, and the root says it lost both.
        text = ranks[0][1]
        self.assertIn("root: supergroup 1 (groups 2-3, nodes 4-7, ranks 8-15)'s judge is lost", text)
        self.assertIn("root: group 2 (nodes 4-5, ranks 8-11)'s judge is lost", text)
        # Rank 0's table has every rank its leader could reach past the lost
        # judges: node 5's records at the root, nodes 6-7's at group 3's
        # judge (a dead judge's store is tried once, or not at all when the
        # root knows it lost: a try per group waited out rank 0's deadline).
        summary = strip_prefix(text)
        self.assertIn("ranks 8,9 missing: ", summary, summary[-3000:])
        rows = {line.split()[0]: line for line in summary.splitlines() if line[:1].isdigit()}
        for r in range(10, 16):
            self.assertIn(f"node{r // PER_NODE + 1}", rows[str(r)], summary[-3000:])
            self.assertNotIn("MISSING", rows[str(r)], summary[-3000:])

if __name__ == "__main__":
    unittest.main()
