"""The live statistics mode: ActivationDumper(mode="stats") scans each tensor
at hook time through libgpudiag_scan.so (ctypes, from this build tree) and
writes only its statistics; `gpudiag scan` must print from that the same
report as from the tensor dump of the same run and as the live detector,
byte for byte. Also: the library itself, the size of a stats dump, the
dumper stopping at the first nan (stop_on_nan), rank-named files, and the
warning when a dump's oldest batch already starts with nan/inf."""

import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn

from scanlib import BUILD_DIR, DetectorStop, LiveDetector, dump_activations, scan
from test_scan_torch import TinyLM

sys.path.insert(0, os.path.join(os.path.dirname(dump_activations.__file__)))
import gpudiag_scan  # noqa: E402  (scripts/)

LIB = os.path.join(BUILD_DIR, "libgpudiag_scan.so")


def train(model, out, steps=20, **dumper_options):
    """Trains TinyLM with a tensor dumper, a stats dumper and the live detector
    (in that hook order) until the detector stops it; returns its text."""
    torch.manual_seed(1)
    dumpers = [dump_activations.ActivationDumper(model, os.path.join(out, mode), mode=mode, lib=LIB,
                                                 stop_on_nan=False, **dumper_options)
               for mode in ("tensors", "stats")]
    detector = LiveDetector(model)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    try:
        for _ in range(steps):
            logits, _ = model(torch.randint(0, 50, (2, 6)))
            opt.zero_grad()
            logits.float().logsumexp(-1).mean().backward()
            opt.step()
            with torch.no_grad():
                for b in model.blocks:
                    b.ff.wo.weight.mul_(1e9)
                    b.ff.wi_1.weight.mul_(1e9)
    except DetectorStop:
        pass
    finally:
        detector.close()
        for d in dumpers:
            d.close()
    return detector.text()


def du(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


class Library(unittest.TestCase):
    def test_ctypes_loads_the_build_trees_library_and_scans_exactly(self):
        lib = gpudiag_scan.load(LIB)
        self.assertEqual(lib.path, LIB)
        self.assertIn("scan ABI 1", lib.version)
        x = torch.tensor([0.5, -3.0, float("inf"), 0.0, 1e-45, 250.0], dtype=torch.float32)
        s = lib.scan(x)
        self.assertEqual((s["count"], s["abs_min"], s["abs_max"]), (6, 0.0, math.inf))
        self.assertEqual((s["pos_inf"], s["zero"], s["subnormal"], s["ge_1e2"]), (1, 1, 1, 2))
        b = lib.scan(torch.tensor([1.0, -2.5, float("nan")], dtype=torch.bfloat16))
        self.assertEqual(b["nan"], 1)
        self.assertTrue(math.isnan(b["abs_max"]))
        # A non-contiguous view is scanned as the values it shows.
        m = torch.arange(12, dtype=torch.int16).reshape(3, 4).t()
        self.assertEqual(lib.scan(m)["abs_max"], 11)

    def test_a_missing_library_is_one_clear_error(self):
        with self.assertRaises(gpudiag_scan.ScanError) as e:
            gpudiag_scan.load("/nonexistent/libgpudiag_scan.so").scan(torch.zeros(1))
        self.assertIn("libgpudiag_scan.so", str(e.exception))


class StatsMode(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_the_stats_dump_gives_the_tensor_dumps_report_and_the_live_detectors(self):
        torch.manual_seed(0)
        live = train(TinyLM().to(torch.bfloat16).train(), self.dir)
        self.assertIn("Detected inf/nan during batch_number=", live)
        stats_files = sorted(os.listdir(os.path.join(self.dir, "stats")))
        self.assertTrue(stats_files and all(f.endswith(".stats.json") for f in stats_files), stats_files)
        from_stats = scan(os.path.join(self.dir, "stats"))
        from_tensors = scan(os.path.join(self.dir, "tensors"))
        self.assertEqual(from_stats.returncode, 1, from_stats.stderr)
        self.assertEqual(from_stats.stdout, from_tensors.stdout)
        self.assertEqual(from_stats.stdout, live)

    def test_diff_reads_stats_dumps_as_it_scans_tensor_dumps(self):
        # The README's `gpudiag scan dumps/ --diff 1 3`, on what the dumper
        # writes by default (statistics), and one side of each kind.
        torch.manual_seed(0)
        train(TinyLM().to(torch.bfloat16).train(), self.dir)
        stats, tensors = os.path.join(self.dir, "stats"), os.path.join(self.dir, "tensors")
        numbers = sorted(int(f.split("-")[1].split(".")[0]) for f in os.listdir(stats))
        self.assertGreaterEqual(len(numbers), 2, numbers)
        a, b = str(numbers[0]), str(numbers[-1])
        from_stats = scan(stats, "--diff", a, b)
        from_tensors = scan(tensors, "--diff", a, b)
        mixed = scan("--diff", f"{stats}@{a}", f"{tensors}@{b}")
        for r in (from_stats, from_tensors, mixed):
            self.assertEqual(r.returncode, 0, r.stderr)
        body = lambda r: r.stdout.split("\n", 1)[1]  # the rows, after the line naming the sides
        self.assertEqual(body(from_stats), body(from_tensors))
        self.assertEqual(body(mixed), body(from_tensors))
        self.assertIn(f"batch {a} of {stats} -> batch {b} of {stats}", from_stats.stdout)
        self.assertRegex(from_stats.stdout.splitlines()[0], r"entries aligned .* grew")

    def test_a_stats_dump_is_at_most_one_percent_of_the_tensors(self):
        model = nn.Sequential(nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 512))
        torch.manual_seed(0)
        dumpers = [dump_activations.ActivationDumper(model, os.path.join(self.dir, m), mode=m, lib=LIB)
                   for m in ("tensors", "stats")]
        for _ in range(2):
            model(torch.randn(512, 512))  # 1 MiB activations
        for d in dumpers:
            d.close()
        tensors, stats = du(os.path.join(self.dir, "tensors")), du(os.path.join(self.dir, "stats"))
        self.assertGreater(tensors, 8 << 20)
        self.assertLessEqual(stats, tensors / 100, (stats, tensors))
        self.assertEqual(scan(os.path.join(self.dir, "stats")).stdout,
                         scan(os.path.join(self.dir, "tensors")).stdout)

    def blowup(self, **options):
        """A model whose last layer's weight overflows at its 4th batch."""
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).to(torch.bfloat16)
        dumper = dump_activations.ActivationDumper(model, self.dir, lib=LIB, **options)
        raised = None
        for _ in range(8):
            try:
                model(torch.randn(2, 8, dtype=torch.bfloat16))
            except FloatingPointError as e:
                raised = e
                break
            with torch.no_grad():
                model[2].weight.mul_(1e10)
        dumper.close()
        return raised

    def test_stop_on_nan_raises_after_writing_the_batch_that_holds_the_cause(self):
        raised = self.blowup(keep_last=2)
        self.assertIsNotNone(raised, "the dumper did not stop at the first inf")
        self.assertIn("nan/inf in 2 Linear weight in batch 4", str(raised))
        self.assertEqual(sorted(os.listdir(self.dir)), ["batch-000003.stats.json", "batch-000004.stats.json"])
        r = scan(self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Detected inf/nan during batch_number=4", r.stdout)
        self.assertNotIn("the cause is earlier than this dump", r.stderr)

    def test_the_stop_message_of_one_rank_of_many_names_a_command_that_works(self):
        raised = self.blowup(keep_last=2, rank=3)
        self.assertIsNotNone(raised)
        command = str(raised).split(": gpudiag ", 1)[1].split()
        self.assertEqual(command[-2:], ["--rank", "3"], str(raised))
        r = scan(*command[1:])  # the command as the message gives it
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("Detected inf/nan during batch_number=4", r.stdout)

    def test_without_it_keep_last_keeps_the_first_inf_batch_beside_the_newest(self):
        # The recipe of docs/scan.md (keep_last=4, stop_on_nan=False): the run
        # goes on, and the batch that first went inf (with the one before it)
        # stays for scan to lead with.
        raised = self.blowup(keep_last=2, stop_on_nan=False)
        self.assertIsNone(raised)
        self.assertEqual(sorted(os.listdir(self.dir)), ["batch-000003.stats.json", "batch-000004.stats.json",
                                                        "batch-000006.stats.json", "batch-000007.stats.json"])
        r = scan(self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Detected inf/nan during batch_number=4", r.stdout)
        self.assertNotIn("the cause is earlier than this dump", r.stderr)
        # Without them (deleted by hand) scan says the cause is earlier.
        for n in (3, 4):
            os.remove(os.path.join(self.dir, f"batch-00000{n}.stats.json"))
        r = scan(self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the oldest batch of the dump (batch 6) starts with nan/inf", r.stderr)
        self.assertIn("the cause is earlier than this dump", r.stderr)

    def test_keep_last_on_a_healthy_run_keeps_only_the_newest(self):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
        for mode in ("stats", "tensors"):
            out = os.path.join(self.dir, mode)
            with dump_activations.ActivationDumper(model, out, lib=LIB, keep_last=2, mode=mode,
                                                   stop_on_nan=False):
                for _ in range(6):
                    model(torch.randn(2, 8) * 1e30)  # huge, finite
            self.assertEqual(sorted(f.split(".")[0] for f in os.listdir(out)),
                             ["batch-000004", "batch-000005"])

    def test_tensors_mode_keeps_the_first_inf_batch_too(self):
        raised = self.blowup(keep_last=2, stop_on_nan=False, mode="tensors")
        self.assertIsNone(raised)
        self.assertEqual(sorted(os.listdir(self.dir)), ["batch-000003.safetensors", "batch-000004.safetensors",
                                                        "batch-000006.safetensors", "batch-000007.safetensors"])
        r = scan(self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Detected inf/nan during batch_number=4", r.stdout)

    def test_files_carry_the_rank_and_scan_reports_every_rank_or_one(self):
        model = nn.Sequential(nn.Linear(4, 4))
        for rank in (0, 1):
            os.environ["RANK"] = str(rank)
            try:
                with dump_activations.ActivationDumper(model, self.dir, lib=LIB):
                    model(torch.full((2, 4), float(rank + 1)))
            finally:
                del os.environ["RANK"]
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["batch-000000.rank00000.stats.json", "batch-000000.rank00001.stats.json"])
        with open(os.path.join(self.dir, "batch-000000.rank00001.stats.json")) as f:
            self.assertEqual(json.load(f)["rank"], 1)
        r = scan(self.dir)  # both clean: the line, the table, two empty reports
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "no inf or nan in any of ranks 0-1\nrank  batch  first inf/nan\n"
                                   "   0      -  none in 1 batch\n   1      -  none in 1 batch\n"
                                   "\n--- rank 0 ---\n\n--- rank 1 ---\n")
        one = scan(self.dir, "--rank", "0", "--trace-batches", "0")
        two = scan(self.dir, "--rank", "1", "--trace-batches", "0")
        self.assertEqual((one.returncode, two.returncode), (0, 0), one.stderr + two.stderr)
        self.assertIn("1.00e+00 1.00e+00 input[0]", one.stdout)
        self.assertIn("2.00e+00 2.00e+00 input[0]", two.stdout)

    def test_one_object_recorded_twice_in_a_batch_is_written_once(self):
        # A Sequential's input is its first layer's, its output its last layer's: the
        # same objects, unchanged. An in-place ReLU changes its input: that one is new.
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 64))
        detector = LiveDetector(model, trace_batches=[0])  # hooked first: sees what the dumper sees
        dumper = dump_activations.ActivationDumper(model, self.dir, mode="tensors")
        model(torch.randn(32, 64))
        dumper.close()
        detector.close()
        path = os.path.join(self.dir, "batch-000000.safetensors")
        with open(path, "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        meta = header.pop("__metadata__")
        self.assertEqual(meta["3.0||Sequential|input[0]"], "same as 0.2")
        self.assertEqual(meta["3.1||Sequential|output"], "same as 2.3")
        self.assertEqual(meta["2.2|2|Linear|input[0]"], "same as 1.0")  # the ReLU's result
        self.assertEqual(meta["1.1|1|ReLU|output"], "same as 1.0")  # in place: its input
        self.assertIn("1.0|1|ReLU|input[0]", header)  # changed in place: written again
        self.assertEqual(len(header), 8)  # 12 tensor entries, 8 distinct tensors
        r = scan(self.dir, "--trace-batches", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, detector.text())

    @staticmethod
    def entry(fields):
        return ('{"format": "gpudiag-frames-stats/1", "batch_number": 0, "frames": [{"module": "m",'
                ' "class": "C", "entries": [{"label": "x", ' + fields + '}]}]}')

    @staticmethod
    def stats(**over):
        s = {"count": 2, "abs_min": 0.5, "abs_max": 1.0, "nan": 0, "pos_inf": 0, "neg_inf": 0, "zero": 0,
             "subnormal": 0, "ge_1e2": 0, "ge_1e3": 0, "ge_1e4": 0}
        s.update(over)
        return json.dumps(s)

    def test_a_malformed_stats_file_is_one_line_and_exit_2(self):
        path = os.path.join(self.dir, "batch-000000.stats.json")
        for content, says in (("{", "not JSON"),
                              ('{"format": "other", "batch_number": 0, "frames": []}', "'format'"),
                              ('{"format": "gpudiag-frames-stats/1", "batch_number": 0, "frames": [{"module": "m",'
                               ' "class": "C", "entries": [{"label": "x", "dtype": "F32", "shape": [2],'
                               ' "stats": {"count": 3}}]}]}', "is not the shape's 2 elements"),
                              (self.entry('"dtype": "F99", "shape": [1]'), "not a safetensors dtype"),
                              (self.entry('"dtype": "F32", "shape": [4294967296, 4294967296]'),
                               "product overflows"),
                              (self.entry('"dtype": "F32", "shape": [2], "stats": ' + self.stats(nan=3)),
                               "'nan' exceeds the count"),
                              (self.entry('"dtype": "F32", "shape": [2], "stats": ' + self.stats(nan=1)),
                               "exactly when 'nan' is above 0"),
                              (self.entry('"dtype": "F32", "shape": [2], "stats": ' +
                                          self.stats(abs_min=5, abs_max=1)), "abs_min is above abs_max"),
                              (self.entry('"kind": "maybe"'), "'kind' is not"),
                              ('{"format": "gpudiag-frames-stats/1", "batch_number": 0, "batch_number": 7,'
                               ' "frames": []}', 'the key "batch_number" twice')):
            with open(path, "w") as f:
                f.write(content)
            r = scan(self.dir)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(says, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        good = self.entry('"dtype": "F32", "shape": [2], "stats": ' + self.stats())
        for name in ("batch-000000.stats.json", "copy.stats.json"):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(good)
        r = scan(self.dir)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("both hold batch 0", r.stderr)


if __name__ == "__main__":
    unittest.main()
