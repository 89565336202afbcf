"""gpudiag launch --stragglers across two network-namespace nodes
(scripts/netns-hosts.sh star), 2 real torch (1.13, gloo) DDP ranks each,
the launchers meeting under --rdzv-backend c10d: a rank of node-2 made slow
in its data loading is named on both launchers' output, by its node's host
and local rank, and no other rank is; with node-2's recorded clock 5 s ahead
(GPUDIAG_STRAGGLERS_TEST_SKEW_NS: namespaces share the wall clock, so the
skew is injected) a healthy job names nobody on either launcher, and a slow
rank of node-1 is still the one named (a judge comparing the hosts' clocks
raw sees node-2's ranks 5 s late and misses it). Every order here comes from
a process's exit, none from a sleep."""
import json
import os
import re
import shutil
import subprocess
import unittest

from harness import BIN, TORCH_PYTHON, clean_env, free_port, have_torch, write_scripts
from netns_nodes import star

TRAIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch", "train.py"))
GUARD = 300  # seconds; each job here ends well before it
NAMED = re.compile(r"^straggler: rank (\d+) \[(node-\d)-(\d+)\] arrives [\d.]+ ms late "
                   r"at \d+% of collectives in group 0 ", re.M)
SKEW_NS = 5_000_000_000


@unittest.skipUnless(have_torch() and os.geteuid() == 0,
                     "needs Debian's python3-torch and root (network namespaces)")
class StragglersAcrossTwoNodes(unittest.TestCase):
    PREFIX = "gsn"

    def setUp(self):
        star(self, self.PREFIX, 2)
        self.dir = write_scripts("gpudiag-stragglers-nodes-", {})
        self.addCleanup(shutil.rmtree, self.dir, True)

    def job(self, *train_args, skew_ns=0, steps=60):
        """Both launchers at once; returns {i: (stderr, the stragglers' --json)}."""
        port = free_port()
        procs = {}
        for i in (1, 2):
            skew = f"export GPUDIAG_STRAGGLERS_TEST_SKEW_NS={skew_ns}; " if i == 2 and skew_ns else ""
            inner = (f"hostname node-{i}; export GLOO_SOCKET_IFNAME={self.PREFIX}-h{i}; {skew}"
                     f"exec {BIN} launch --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d "
                     f"--rdzv-endpoint 10.78.0.1:{port} --rdzv-id stragglers --stragglers "
                     f"--json {self.dir}/node{i}.json {TRAIN} --steps {steps} --quiet "
                     + " ".join(train_args))
            env = dict(clean_env(), PYTHON_EXEC=TORCH_PYTHON, GPUDIAG_SECRET="s" * 32,
                       OMP_NUM_THREADS="1")
            procs[i] = subprocess.Popen(
                ["ip", "netns", "exec", f"{self.PREFIX}-{i}", "unshare", "--uts", "sh", "-c", inner],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        outs = {}
        for i, p in procs.items():
            try:
                _, err = p.communicate(timeout=GUARD)
            finally:
                p.kill()
            self.assertEqual(p.returncode, 0, f"node-{i}: " + err[-3000:])
            with open(f"{self.dir}/node{i}.json") as f:
                outs[i] = (err, json.load(f)["stragglers"])
        return outs

    def assert_named_on_both(self, outs, rank, host, local):
        for i, (err, report) in outs.items():
            named = NAMED.findall(err)
            self.assertTrue(named, f"node-{i}: " + err[-3000:])
            self.assertEqual({n for n in named}, {(str(rank), host, str(local))},
                             f"node-{i}: " + err[-3000:])
            self.assertEqual([(e["rank"], e["label"]) for e in report["named"]],
                             [(rank, f"[{host}-{local}]")], f"node-{i}: {report}")
            self.assertLessEqual(report["named"][0]["named_at_collective"], 10 + 20, report)
            self.assertRegex(err, r"gpudiag launch: stragglers: 1 named \(120 collectives")

    def test_a_slow_rank_of_node_2_is_named_on_both_launchers(self):
        outs = self.job("--slow-rank", "3", "--slow-in", "data", "--slow-ms", "100", "--slow-from", "5")
        self.assert_named_on_both(outs, 3, "node-2", 1)

    def test_skewed_clocks_name_nobody_and_a_slow_rank_is_still_the_one(self):
        outs = self.job(skew_ns=SKEW_NS, steps=100)
        for i, (err, report) in outs.items():
            self.assertNotIn("straggler: rank", err, f"node-{i}: " + err[-3000:])
            self.assertIn("gpudiag launch: stragglers: none (200 collectives judged in 1 group", err)
            self.assertEqual(report["named"], [])
            self.assertEqual((report["unshared"], report["missed_batches"]), (0, 0), report)
        outs = self.job("--slow-rank", "1", "--slow-in", "data", "--slow-ms", "100", "--slow-from", "5",
                        skew_ns=SKEW_NS)
        self.assert_named_on_both(outs, 1, "node-1", 1)


if __name__ == "__main__":
    unittest.main()
