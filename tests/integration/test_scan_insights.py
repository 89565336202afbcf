"""What `gpudiag scan` says beyond the reference report, on dumps the tests
make: the first frame near its dtype's limit, the frame losing most
precision to underflow, a hint for float bits stored as integers, and the
summary line of a clean scan. All of it goes to stderr and the JSON; stdout
stays the reference detector's report, byte for byte."""

import json
import os
import tempfile
import unittest

import numpy as np
import torch

from scanlib import DumpBuilder, scan

F16 = torch.float16


def frames(builder, batch, big=100.0, tiny=None, extra=()):
    """One small batch: an fp16 linear whose output abs max is `big`; with
    `tiny`, a frame whose output is mostly that (subnormal) value."""
    torch.manual_seed(batch)
    x = torch.randn(64, dtype=F16)
    builder.add_frame(batch, "lin", "Linear", [("input[0]", x), ("output", (x / x.abs().max()) * big)])
    if tiny is not None:
        y = torch.full((100,), tiny, dtype=F16)
        y[:10] = 1.0
        builder.add_frame(batch, "norm", "LayerNorm", [("input[0]", x), ("output", y)])
    for path, cls, entries in extra:
        builder.add_frame(batch, path, cls, entries)
    builder.add_frame(batch, "", "Net", [("input[0]", x), ("output", x * 2)])


class Insights(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def run_scan(self, builder, *args):
        out = os.path.join(self.dir, "dump")
        builder.write(out)
        js = os.path.join(self.dir, "scan.json")
        r = scan(out, "--json", js, *args)
        with open(js) as f:
            doc = json.load(f)
        self.assertEqual(r.stdout, builder.expected(), "stdout must stay the reference report")
        return r, doc["insights"]

    def test_the_first_frame_near_the_fp16_limit_is_named_before_the_overflow(self):
        b = DumpBuilder()
        frames(b, 0, big=100.0)
        frames(b, 1, big=40000.0)  # >= half of 65504: the cause
        frames(b, 2, big=float("inf"))  # the symptom the reference reports
        r, insights = self.run_scan(b)
        self.assertEqual(r.returncode, 1, r.stderr)
        line = [l for l in r.stderr.splitlines() if "near the F16 limit" in l]
        self.assertEqual(len(line), 1, r.stderr)
        self.assertIn("(abs max >= 0.5 of 6.55e+04): batch 1, frame 0 (lin Linear) output, abs max 4.00e+04",
                      line[0])
        self.assertEqual(insights["near_limit"]["at"], {"batch": 1, "frame": 0, "module": "lin",
                                                        "class": "Linear", "label": "output"})
        self.assertNotIn("clean:", r.stderr)

    def test_the_fraction_is_an_option(self):
        b = DumpBuilder()
        frames(b, 0, big=10000.0)
        r, insights = self.run_scan(b, "--near-limit", "0.1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("near the F16 limit (abs max >= 0.1 of 6.55e+04): batch 0, frame 0", r.stderr)
        r = scan(os.path.join(self.dir, "dump"))
        self.assertNotIn("near the", r.stderr)  # 10000 is below half of 65504

    def test_the_frame_losing_most_precision_to_underflow(self):
        b = DumpBuilder()
        frames(b, 0, tiny=1e-6)  # fp16 subnormal: below 6.1e-05
        r, insights = self.run_scan(b)
        self.assertIn("most underflow: batch 0, frame 1 (norm LayerNorm) output, 90.0% of its 100 F16 "
                      "elements subnormal", r.stderr)
        self.assertEqual(insights["underflow"]["subnormal"], 90)

    def test_a_clean_scan_ends_with_one_summary_line(self):
        b = DumpBuilder()
        frames(b, 0)
        frames(b, 1)
        r, insights = self.run_scan(b)
        self.assertEqual(r.returncode, 0, r.stderr)
        summary = [l for l in r.stderr.splitlines() if l.startswith("gpudiag scan: clean:")]
        self.assertEqual(len(summary), 1, r.stderr)
        self.assertRegex(summary[0], r"^gpudiag scan: clean: 2 batches, 4 frames, 8 tensors, \d+ (B|KiB) in .*, "
                                     r"no inf or nan$")
        self.assertIsNone(insights["near_limit"])

    def test_bf16_bits_saved_as_int16_get_a_hint(self):
        bits = torch.randn(1000, dtype=torch.bfloat16).view(torch.int16).numpy()
        path = os.path.join(self.dir, "w.npy")
        np.save(path, bits)
        r = scan(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("hint: " + path + " (w) holds I16 values that look like bf16 bit patterns", r.stderr)
        self.assertIn("--dtype bf16", r.stderr)
        # Read as bf16, they are the numbers, and no hint is given.
        r = scan(path, "--dtype", "bf16")
        self.assertNotIn("hint:", r.stderr)
        # Plain integers (token ids, counts) get none either.
        np.save(path, np.arange(1000, dtype=np.int16))
        self.assertNotIn("hint:", scan(path).stderr)

    def test_an_int16_activation_in_a_frames_dump_gets_a_hint_with_its_place(self):
        b = DumpBuilder()
        act = torch.randn(256, dtype=torch.bfloat16).view(torch.int16)
        frames(b, 0, extra=[("mlp", "MLP", [("output", act)])])
        r, insights = self.run_scan(b)
        self.assertIn("hint: batch 0, frame 1 (mlp MLP) output holds I16 values that look like bf16",
                      r.stderr)
        self.assertEqual(insights["dtype_hint"]["looks_like"], "BF16")


class Diff(unittest.TestCase):
    """`scan --diff A B`: the entries whose abs max grew most between two batches."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dump = os.path.join(self.tmp.name, "dump")
        b = DumpBuilder()
        frames(b, 1, big=100.0)
        frames(b, 3, big=25000.0, tiny=1e-6)  # lin's output grew 250x; norm appears only here
        b.write(self.dump)

    def tearDown(self):
        self.tmp.cleanup()

    def test_batches_of_one_dump_aligned_frame_by_frame(self):
        js = os.path.join(self.tmp.name, "diff.json")
        r = scan(self.dump, "--diff", "1", "3", "--json", js)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], f"gpudiag scan --diff: batch 1 of {self.dump} -> batch 3 of {self.dump}: "
                                   "4 entries aligned (0 only in A, 2 only in B), 1 grew")
        self.assertRegex(lines[2], r"^x2\.50e\+02 +1\.00e\+02 +2\.50e\+04 +0 +lin Linear output$")
        with open(js) as f:
            doc = json.load(f)
        self.assertEqual(doc["schema"], "gpudiag-scan-diff/1")
        self.assertEqual(doc["rows"][0]["entry"], "lin Linear output")

    def test_two_dumps_each_named_by_path(self):
        other = os.path.join(self.tmp.name, "other")
        b = DumpBuilder()
        frames(b, 0, big=float("inf"))
        b.write(other)
        r = scan("--diff", self.dump + "@1", other)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("to inf", r.stdout.splitlines()[2])

    def test_a_side_that_is_not_one_batch_is_one_line_and_exit_2(self):
        for args, says in (((self.dump, "--diff", "1", "9"), "holds no batch 9 (it holds 1, 3)"),
                           (("--diff", self.dump, self.dump + "@3"), "holds several batches (it holds 1, 3)"),
                           (("--diff", "1", "3"), "names a batch of the dumps given as paths")):
            r = scan(*args)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(says, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main()
