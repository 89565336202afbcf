"""gpudiag sweep through node leaders (GPUDIAG_TREE=on, groups of 2 nodes, so
every level is there) over a pool of "nodes" made of network namespaces on
one bridge (scripts/netns-hosts.sh star), each node a gpudiag launch of two
ranks, node4's link limited to 200 Mbit/s (tc tbf, a slow NIC): the same
pool swept flat (GPUDIAG_TREE=off) and through the tree names node4 SLOW and
no other, writes the same exclude file, and under the tree rank 0 plans from
the results the groups folded (no rank's round report reaches it). And the
simulator's sweep mode (gpudiag-sim --sweep) names its planted slow node
through the tree of 32 nodes in 4 groups."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from harness import BIN, BUILD_DIR, SOURCE_DIR, run, strip_prefix
from netns_nodes import on_nodes, star

NETNS = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")
SIM = os.path.join(BUILD_DIR, "gpudiag-sim")
NODES = 5


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class SweepThroughNodeLeaders(unittest.TestCase):
    PREFIX = "gst"

    def setUp(self):
        star(self, self.PREFIX, NODES)
        p = run([NETNS, "throttle", self.PREFIX, "4", "200mbit"], timeout=30)
        if p.returncode != 0:
            self.skipTest("tc tbf (sch_tbf) is not available here: " + p.stderr.strip())
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.dir]))

    def sweep(self, tree, port):
        """Sweeps node1..node5 (two ranks each); returns (rank 0's node's
        (rc, out, err), the other nodes' return codes, the exclude file, the
        JSON report)."""
        excl = os.path.join(self.dir, f"exclude-{tree}")
        doc = os.path.join(self.dir, f"sweep-{tree}.json")
        ran = on_nodes(self.PREFIX, {
            i: (f"hostname node{i}; exec {BIN} launch --nnodes {NODES} --node-rank {i - 1} "
                f"--nproc-per-node 2 --master-addr 10.78.0.1 --master-port {port} -- sweep "
                f"--backend host --timeout 30 --pair-timeout 10 --exclude-file {excl} "
                f"--json {doc}")
            for i in range(1, NODES + 1)},
            dict(GPUDIAG_SECRET="s" * 32, GPUDIAG_TREE=tree, GPUDIAG_TREE_GROUP_NODES="2",
                 GPUDIAG_LOG_LEVEL="info"))
        outs = [ran[i] for i in range(1, NODES + 1)]
        with open(excl) as f:
            exclude = f.read()
        with open(doc) as f:
            report = json.load(f)
        return outs[0], [o[0] for o in outs[1:]], exclude, report

    def test_the_tree_names_the_slow_node_as_the_flat_sweep_does(self):
        verdicts = {}
        for tree, port in (("off", 29780), ("on", 29784)):
            (rc, out, err), others, exclude, report = self.sweep(tree, port)
            text = strip_prefix(out)
            self.assertEqual(rc, 1, (tree, text, err[-3000:]))
            self.assertEqual(others, [1] * (NODES - 1), (tree, err[-2000:]))
            self.assertEqual(exclude, "node4\n", (tree, text))
            self.assertIn(f"exclude 1 of {NODES} node(s): node4", text)
            verdicts[tree] = {n["host"]: n["state"] for n in report["nodes"]}
            # Through the tree every rank meets its node's leader, rank 0 too.
            self.assertEqual("meeting the job through the leader of node" in err, tree == "on",
                             (tree, err[-3000:]))
            self.assertRegex(err, r"sweep: round \d+ \(deciding\): \d+ pair\(s\) in ")
        self.assertEqual(verdicts["on"], verdicts["off"])
        self.assertEqual(verdicts["on"], {f"node{i}": "SLOW" if i == 4 else "OK"
                                          for i in range(1, NODES + 1)})


@unittest.skipUnless(os.path.exists(SIM), "gpudiag-sim not built")
class SweepSimulator(unittest.TestCase):
    def test_the_planted_slow_node_is_named_through_the_tree(self):
        p = run([SIM, "--sweep", "--ranks", "256", "--group-nodes", "8", "--slow-node", "19",
                 "--timeout", "5", "--workers", "2", "--store-procs", "2"], timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIn("slow node named alone: yes", p.stdout)
        self.assertIn("32 nodes of 8 ranks (4 groups of 8), slow node simnode19: "
                      "excluded simnode19 SLOW", p.stderr)
        rounds = re.findall(r"sim: sweep round \d+ \(([a-z ]+)\): (\d+) pair\(s\);.*control plane "
                            r"([\d.]+) s a round", p.stderr)
        stages = [r[0] for r in rounds]
        self.assertEqual(stages.count("within nodes"), 7, p.stderr)
        self.assertGreaterEqual(stages.count("node pairs"), 2)
        # Within nodes first, then node pairs and deciding rounds: how many
        # turns of node pairs fit the time budget (and so whether and when a
        # deciding round comes) depends on how fast the rounds ran.
        self.assertEqual(stages[:7], ["within nodes"] * 7, stages)
        self.assertLessEqual(set(stages[7:]), {"node pairs", "deciding"}, stages)
        # A turn of node pairs meets every rank: 256 ranks, 128 pairs.
        self.assertIn("128", [r[1] for r in rounds if r[0] == "node pairs"])

    def test_another_slow_node_is_named_instead(self):
        p = run([SIM, "--sweep", "--ranks", "96", "--group-nodes", "4", "--slow-node", "5",
                 "--timeout", "5", "--workers", "2", "--store-procs", "2"], timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIn("excluded simnode5 SLOW", p.stderr)
