"""`gpudiag scan` on frames dumps built by the test: the report must be what
a live forward-hook detector prints for the same frames (detection,
--max-frames, --trace-batches + --abort-after-batch, frames split over files,
None / not a tensor entries), with the documented exit statuses and JSON."""

import json
import os
import tempfile
import unittest

import torch

from scanlib import DumpBuilder, scan

BF16 = torch.bfloat16


def t(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def model_batches(n_batches, inf_at=None, nan_at=None):
    """Frames of a small encoder-like model, `n_batches` batches; the output
    of the `wo` frame of batch inf_at[0] (frame inf_at[1]) overflows."""
    b = DumpBuilder()
    torch.manual_seed(0)
    for batch in range(n_batches):
        x = torch.randn(4, 8, dtype=BF16) * (batch + 1)
        frames = [
            ("embed", "Embedding", [("weight", torch.randn(16, 8, dtype=BF16)),
                                    ("input[0]", torch.tensor([[1, 5, 0, 7]])), ("output", x)]),
            ("block.0.layer_norm", "RMSNorm", [("weight", torch.ones(8, dtype=BF16)), ("input[0]", x),
                                               ("output", x / 3)]),
            ("block.0.ff.wi", "Linear", [("weight", torch.randn(32, 8, dtype=BF16) / 100), ("input[0]", x / 3),
                                         ("output", torch.randn(4, 32, dtype=BF16) * 60000)]),
            ("block.0.ff.wo", "Linear", [("weight", torch.randn(8, 32, dtype=BF16)), ("bias", torch.zeros(8)),
                                         ("input[0]", torch.randn(4, 32, dtype=BF16)),
                                         ("output", torch.randn(4, 8, dtype=torch.float16) * 1000)]),
            ("block.0", "Block", [("input[0]", x), ("input[1]", None), ("output[0]", x * 2), ("output[1]", None),
                                  ("output[2]", [1, 2]), ("output[3][0]", torch.full((2,), -0.0)),
                                  ("output[3][1]", torch.tensor(7))]),
            ("lm_head", "Linear", [("weight", torch.randn(3, 8, dtype=torch.float64)),
                                   ("input[0]", x.to(torch.float32)), ("output", torch.randn(4, 3))]),
            ("", "Model", [("input[0]", torch.tensor([[1, 5, 0, 7]])), ("output", "a dict")]),
        ]
        for f, (path, cls, entries) in enumerate(frames):
            entries = [(label, v if not isinstance(v, str) else object()) for label, v in entries]
            if inf_at == (batch, f):
                entries[-1] = ("output", torch.tensor([1.0, float("inf"), -3.0], dtype=torch.float16))
            if nan_at == (batch, f):
                entries[0] = (entries[0][0], torch.tensor([float("nan"), 1.0, float("-inf")], dtype=BF16))
            b.add_frame(batch, path, cls, entries)
    return b


class ScanReport(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def dump(self, builder, split=1, sub="dump"):
        path = os.path.join(self.dir, sub)
        builder.write(path, split=split)
        return path

    def assert_report(self, result, expected, code):
        self.assertEqual(result.stdout.splitlines(), expected.splitlines(), result.stderr)
        self.assertEqual(result.stdout, expected)
        self.assertEqual(result.returncode, code, result.stderr)

    def test_detection_prints_the_frames_leading_to_the_first_inf(self):
        b = model_batches(5, inf_at=(3, 3))
        path = self.dump(b)
        r = scan(path)
        expected = b.expected()
        self.assertIn("Detected inf/nan during batch_number=3", expected)
        self.assertIn("Last 21 forward frames:", expected)
        self.assert_report(r, expected, 1)
        self.assertIn("inf/nan detected", r.stderr)

    def test_max_frames_bounds_the_report(self):
        b = model_batches(3, inf_at=(1, 2))
        path = self.dump(b)
        for n in (0, 1, 5, 8, 100):
            with self.subTest(max_frames=n):
                self.assert_report(scan(path, "--max-frames", n), b.expected(max_frames=n), 1)

    def test_frames_split_over_files_in_any_order(self):
        b = model_batches(3, inf_at=(2, 5))
        path = self.dump(b, split=3)
        files = sorted(os.listdir(path), reverse=True)
        self.assertEqual(len(files), 9)
        r = scan(*[os.path.join(path, f) for f in files])
        self.assert_report(r, b.expected(), 1)

    def test_nan_in_a_weight_and_the_root_frame(self):
        b = model_batches(2, nan_at=(1, 0))
        self.assert_report(scan(self.dump(b, sub="w")), b.expected(), 1)
        root = model_batches(2, inf_at=(0, 6))
        expected = root.expected()
        self.assertIn("batch_number=1", expected)  # the root frame ends batch 0 before it is analysed
        self.assert_report(scan(self.dump(root, sub="r")), expected, 1)

    def test_device_auto_says_which_scanner_and_why(self):
        b = model_batches(3, inf_at=(1, 2))
        r = scan(self.dump(b), "--device", "auto", "--log-level", "info")
        self.assert_report(r, b.expected(), 1)
        # Without a usable GPU: the CPU, and why; with one and this little data (a few KiB):
        # the CPU without a measurement, and why; with one and enough data: both rates and the winner.
        self.assertRegex(r.stderr, r"--device auto: (using the CPU scanner: .+|[\d.]+ [KMG]?i?B of tensor "
                         r"data to measure on, less than 64 MiB: using the CPU scanner|on the first "
                         r"[\d.]+ [KMG]?i?B the CPU scanner ran at [\d.]+ GB/s, the GPU \(read, copy, "
                         r"scan\) at [\d.]+ GB/s: using the (CPU|GPU))")

    def test_clean_dump_prints_nothing(self):
        r = scan(self.dump(model_batches(3)))
        self.assert_report(r, "", 0)

    def test_trace_batches_and_abort(self):
        b = model_batches(5)
        path = self.dump(b)
        expected = b.expected(trace_batches=[1, 3], abort_after=3)
        self.assertIn("*** Starting batch number=3 ***", expected)
        self.assertNotIn("batch number=4", expected)
        r = scan(path, "--trace-batches", "1,3", "--abort-after-batch", "3")
        self.assert_report(r, expected, 0)
        self.assertIn("aborting after 4 batches due to --abort-after-batch=3", r.stderr)
        # The first batch's marker is part of the first frame.
        r0 = scan(path, "--trace-batches", "0", "--abort-after-batch", "0")
        self.assert_report(r0, b.expected(trace_batches=[0], abort_after=0), 0)
        self.assertTrue(r0.stdout.startswith("\n\n                  *** Starting batch number=0 ***\n"))

    def test_inf_in_a_traced_batch_is_reported_after_it(self):
        b = model_batches(3, inf_at=(1, 2))
        expected = b.expected(trace_batches=[1])
        self.assertIn("Detected inf/nan during batch_number=2", expected)
        self.assert_report(scan(self.dump(b), "--trace-batches", "1"), expected, 1)
        # Traced to the end: the has-infs line, no report, still exit 1.
        r = scan(self.dump(b, sub="t"), "--trace-batches", "0,1,2")
        self.assert_report(r, b.expected(trace_batches=[0, 1, 2]), 1)
        self.assertNotIn("Detected", r.stdout)

    def test_json_has_every_statistic(self):
        b = DumpBuilder()
        sub = torch.tensor([0x0001, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0x5A40, 0x63D0, 0x70E2],
                           dtype=torch.int32).to(torch.int16).view(torch.float16)
        b.add_frame(0, "m", "M", [("input[0]", sub), ("output", None)])
        b.add_frame(0, "", "Root", [("output", torch.zeros(0, 3))])
        out = os.path.join(self.dir, "scan.json")
        r = scan(self.dump(b), "--json", out, "--trace-batches", "0")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("            empty output", r.stdout)  # torch's min() would raise here
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual(doc["schema"], "gpudiag-scan/1")
        self.assertEqual(doc["mode"], "frames")
        self.assertEqual(doc["options"], {"max_frames": 21, "trace_batches": [0], "abort_after_batch": None})
        entries = doc["batches"][0]["frames"][0]["entries"]
        self.assertEqual(entries[0]["tensor"], {"name": "0.0|m|M|input[0]", "dtype": "F16", "shape": [9]})
        # 2^-24, -0, inf, -inf, nan, 1, 200, 1000, 10000
        self.assertEqual(entries[0]["stats"], {"count": 9, "abs_min": "nan", "abs_max": "nan", "nan": 1,
                                               "pos_inf": 1, "neg_inf": 1, "zero": 1, "subnormal": 1,
                                               "ge_1e2": 5, "ge_1e3": 4, "ge_1e4": 3})
        self.assertEqual(entries[1], {"label": "output", "kind": "None", "file": entries[1]["file"]})
        empty = doc["batches"][0]["frames"][1]["entries"][0]["stats"]
        self.assertEqual((empty["count"], empty["abs_min"]), (0, None))
        res = doc["result"]
        self.assertEqual(res["stop"], "end")
        self.assertEqual(res["first"]["label"], "input[0]")
        self.assertEqual(res["first"]["module"], "m")

    def test_bad_options_are_usage_errors(self):
        path = self.dump(model_batches(1))
        for args in (["--max-frames", "-1"], ["--trace-batches", "x"], ["--abort-after-batch", "-2"],
                     ["--dtype", "f7"], ["--device", "tpu"], [os.path.join(self.dir, "missing")]):
            with self.subTest(args=args):
                r = scan(path, *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
