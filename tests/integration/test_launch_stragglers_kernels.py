"""gpudiag launch --stragglers reading NCCL kernel times from PyTorch's flight recorder,
through the call torch 2.x offers (_dump_nccl_trace), on the real torch 1.13 over gloo
with 4 ranks; the recorder itself is a stand-in that follows torch's source
(tests/fixtures/torch/fr_kernels.py says which rule comes from where; on a GPU,
scripts/gpu-owed.sh runs the real one). A healthy job names nobody and its summary counts
the kernels it judged; a rank whose GPU is late while its host calls on time, which the
host-side records cannot see, is named on its GPU, and no other rank is; a rank whose
host is late, which both sources see, is said once, by the host-side records; without
TORCH_NCCL_ENABLE_TIMING the recorder has no kernel times and nothing is read."""
import json
import os
import re
import tempfile
import unittest

from harness import have_torch, launch_torch_python

FIXTURE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch",
                                       "fr_kernels.py"))
ANY_NAMED = re.compile(r"^straggler: rank (\d+) .*arrives ([\d.]+) ms late( on its GPU)? at ", re.M)
SUMMARY = re.compile(r"gpudiag launch: stragglers: (none|\d+ named) \((\d+) collectives judged in "
                     r"1 group(?:, (\d+) by their NCCL kernel times)?")


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class StragglersFromKernelTimes(unittest.TestCase):
    def launch(self, *args, env=None):
        d = tempfile.mkdtemp(prefix="gpudiag-stragglers-kernels-")
        doc = os.path.join(d, "launch.json")
        p = launch_torch_python("--nproc-per-node", "4", "--stragglers", "--json", doc, FIXTURE,
                                *args, extra_env=env)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        with open(doc) as f:
            return p, json.load(f)["stragglers"]

    def test_a_healthy_job_names_nobody_and_counts_its_kernels(self):
        for run in range(2):
            p, report = self.launch("--steps", "120")
            self.assertNotIn("straggler: rank", p.stderr, run)
            m = SUMMARY.search(p.stderr)
            self.assertTrue(m, p.stderr[-3000:])
            self.assertEqual(m.group(1), "none")
            self.assertEqual(m.group(2), "120")  # the host-side records: one all_reduce a step
            # Kernel times of the default group only (the p2p entries and the unknown group's
            # are not judged); the last ones may not be retired before the ranks end.
            self.assertIsNotNone(m.group(3), p.stderr[-2000:])
            self.assertGreaterEqual(int(m.group(3)), 60)
            self.assertLessEqual(int(m.group(3)), 120)
            self.assertEqual(report["named"], [])
            self.assertEqual(report["kernel_collectives"], int(m.group(3)))

    def test_a_rank_whose_gpu_is_late_is_named_on_its_gpu(self):
        # 300 ms: the stand-in's kernels carry the gloo call's own spread (the rank whose host
        # comes last has the shortest call), tens of ms on a loaded 2-core machine.
        p, report = self.launch("--steps", "80", "--gpu-late-rank", "2", "--gpu-late-ms", "300",
                                "--gpu-late-from", "10")
        named = ANY_NAMED.findall(p.stderr)
        self.assertTrue(named, p.stderr[-3000:])
        self.assertEqual({r for r, *_ in named}, {"2"}, p.stderr[-3000:])
        self.assertTrue(all(gpu for *_, gpu in named), p.stderr[-3000:])  # the host was on time
        self.assertIn("where: compute, on its GPU (NCCL's kernel times", p.stderr)
        self.assertEqual(len(report["named"]), 1, report)
        ep = report["named"][0]
        self.assertEqual((ep["rank"], ep["group"], ep["source"], ep["where"]),
                         (2, 0, "nccl_kernels", "compute"))
        self.assertGreater(ep["late_ms"], 150)
        self.assertLessEqual(ep["named_at_collective"], 11 + 20)  # collective_seq_id from 1
        self.assertRegex(p.stderr, r"gpudiag launch: stragglers: 1 named \(80 collectives")

    def test_a_rank_both_sources_see_is_said_once_by_the_host_side(self):
        p, report = self.launch("--steps", "80", "--host-late-rank", "1", "--host-late-ms", "100",
                                "--gpu-late-from", "10")
        named = ANY_NAMED.findall(p.stderr)
        self.assertTrue(named, p.stderr[-3000:])
        self.assertEqual({(r, gpu) for r, _, gpu in named}, {("1", "")}, p.stderr[-3000:])
        self.assertGreater(report["kernel_collectives"], 0)
        self.assertEqual([(e["rank"], e["source"]) for e in report["named"]], [(1, "host")], report)

    def test_without_timing_no_kernel_time_is_read(self):
        p, report = self.launch("--steps", "40", "--gpu-late-rank", "2", "--gpu-late-from", "0",
                                env={"TORCH_NCCL_ENABLE_TIMING": "0"})
        self.assertNotIn("straggler: rank", p.stderr)
        self.assertEqual(report["kernel_collectives"], 0)
        self.assertNotIn("by their NCCL kernel times", p.stderr)


if __name__ == "__main__":
    unittest.main()
