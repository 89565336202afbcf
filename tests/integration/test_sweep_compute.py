"""The compute phase in gpudiag sweep's first stage, over a pool of "nodes"
made of network namespaces on one bridge (scripts/netns-hosts.sh star), each
node a gpudiag launch of its ranks on the host backend (every rank runs the
same GEMMs on its CPU; rank 0 compares their checksums at the exchange):

- GPUDIAG_TEST_RAISE=FLIP@compute:5 flips a bit of rank 5's results (node3's
  second rank): node3 alone is FAILED and excluded, its row saying which rank
  differs from how many of its model; every other node is OK; the same
  through node leaders (GPUDIAG_TREE=on);
- a healthy pool of 4 nodes of 3 ranks each (12 ranks on this machine's CPUs,
  more ranks than CPUs on every node, while other tests load it) excludes
  nothing, and rank 0's compute line says the checksums are identical on all
  12 ranks and the rate is not judged;
- --no-compute leaves the phase out (a flipped rank then changes nothing);
- --no-compute with --compute-seconds is a usage error.

Nothing sleeps: every run ends on its own, bounded by on_nodes' timeout."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from harness import BIN, clean_env, raise_at, run, strip_prefix
from netns_nodes import on_nodes, star

# The host backend's bf16 GEMM checksum (n = 64), as tests/integration/test_compute.py knows it.
BF16 = "5f9d572c004ce395"


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class SweepCompute(unittest.TestCase):
    PREFIX = "gsc"

    def pool(self, n):
        star(self, self.PREFIX, n)
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return d

    def sweep(self, n, per_node, *args, env=None):
        """Starts node1..nodeN (per_node ranks each); returns [(returncode, stdout, stderr)]."""
        outs = on_nodes(self.PREFIX, {
            i: (f"hostname node{i}; exec {BIN} launch --nnodes {n} --node-rank {i - 1} "
                f"--nproc-per-node {per_node} --master-addr 10.78.0.1 --master-port 29780 -- sweep "
                f"--backend host --timeout 60 --pair-timeout 20 " + " ".join(args))
            for i in range(1, n + 1)}, dict(GPUDIAG_SECRET="c" * 32, **(env or {})))
        return [outs[i] for i in range(1, n + 1)]

    def test_a_flipped_rank_fails_its_node_alone(self):
        self.flipped_rank_fails_its_node_alone({})

    def test_through_node_leaders_too(self):
        # Groups of 2 nodes: rank 0 reads every record at the exchange from
        # the groups' stores, and judges the compute phase from them.
        self.flipped_rank_fails_its_node_alone(dict(GPUDIAG_TREE="on", GPUDIAG_TREE_GROUP_NODES="2"))

    def flipped_rank_fails_its_node_alone(self, env):
        d = self.pool(4)
        excl, doc_path = os.path.join(d, "exclude"), os.path.join(d, "sweep.json")
        outs = self.sweep(4, 2, "--exclude-file", excl, "--json", doc_path,
                          env=dict(raise_at("FLIP@compute:5"), **env))
        rc, out, err = outs[0]
        text = strip_prefix(out)
        self.assertEqual([o[0] for o in outs], [1, 1, 1, 1], text + err[-3000:])
        with open(excl) as f:
            self.assertEqual(f.read(), "node3\n", text)
        with open(doc_path) as f:
            doc = json.load(f)
        states = {n["host"]: n["state"] for n in doc["nodes"]}
        self.assertEqual(states, {"node1": "OK", "node2": "OK", "node3": "FAILED", "node4": "OK"}, text)
        reason = next(n for n in doc["nodes"] if n["host"] == "node3")["reason"]
        self.assertRegex(reason, r"^rank 5 \[node3-1\] failed in compute: compute result differs from the known "
                                 r"checksum of CPU[^(]*\(host backend, kernel v1\) \(bf16 GEMM, checksum [0-9a-f]{16}, "
                                 r"known " + BF16 + r"\); 7 of 8 ranks of its model give the known one$")
        self.assertRegex(text, r"\nnode3 +FAILED +rank 5 \[node3-1\] failed in compute: ")
        self.assertIn("compute: bf16, fp16 and fp32 GEMM checksums identical on 7 of 8 ranks", text)
        self.assertIn("; rank 5 differs from the known checksums", text)
        self.assertEqual(doc["compute"]["slow"], 0)
        self.assertFalse(doc["compute"]["rates_judged"])
        self.assertIn("exclude 1 of 4 node(s): node3", text)

    def test_a_healthy_crowded_pool_excludes_nothing(self):
        d = self.pool(4)
        excl, doc_path = os.path.join(d, "exclude"), os.path.join(d, "sweep.json")
        outs = self.sweep(4, 3, "--exclude-file", excl, "--json", doc_path)
        rc, out, err = outs[0]
        text = strip_prefix(out)
        self.assertEqual([o[0] for o in outs], [0, 0, 0, 0], text + err[-3000:])
        with open(excl) as f:
            self.assertEqual(f.read(), "\n")
        with open(doc_path) as f:
            doc = json.load(f)
        self.assertEqual({n["state"] for n in doc["nodes"]}, {"OK"}, text)
        lines = [l for l in text.splitlines() if l.startswith("compute:")]
        self.assertEqual(len(lines), 1, text)
        self.assertRegex(lines[0], r"^compute: bf16, fp16 and fp32 GEMM checksums identical on 12 ranks "
                                   r"\(CPU[^)]*, median [0-9.]+ [GT]FLOP/s\), [0-9.]+ m?s, "
                                   r"matching the known checksums; rate not judged \(host backend\)$")
        self.assertEqual(doc["compute"]["line"], lines[0])
        self.assertFalse([w for w in doc["warnings"] if "compute" in w], doc["warnings"])

    def test_no_compute_leaves_the_phase_out(self):
        d = self.pool(2)
        doc_path = os.path.join(d, "sweep.json")
        outs = self.sweep(2, 2, "--no-compute", "--json", doc_path, env=raise_at("FLIP@compute:1"))
        text = strip_prefix(outs[0][1])
        self.assertEqual([o[0] for o in outs], [0, 0], text + outs[0][2][-3000:])
        self.assertNotIn("compute:", text)
        with open(doc_path) as f:
            self.assertIsNone(json.load(f)["compute"])


class SweepComputeCommandLine(unittest.TestCase):
    def test_no_compute_excludes_compute_seconds(self):
        p = run([BIN, "sweep", "--no-compute", "--compute-seconds", "1"], env=clean_env())
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("--compute-seconds", p.stderr)


if __name__ == "__main__":
    unittest.main()
