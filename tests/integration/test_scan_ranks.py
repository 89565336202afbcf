"""Every rank in one scan: `gpudiag scan DIR` over the dumps of a DDP job's 4
ranks (gloo, under `gpudiag launch`) names the rank that went inf/nan first,
its batch and frame, before a table of ranks and each rank's report; an inf
fed to one rank that reaches every rank a step later (DDP's gradient
all-reduce) is attributed to that rank and batch, from stats dumps and tensor
dumps alike; a loss made inf outside the modules is caught at its batch
(ActivationDumper.watch); --rank N still gives one rank's report; --json
carries the same."""

import json
import os
import re
import tempfile
import unittest

import torch
import torch.nn as nn

from harness import BIN, TORCH_PYTHON, clean_env, free_port, have_torch, run
from scanlib import BUILD_DIR, dump_activations, scan

LIB = os.path.join(BUILD_DIR, "libgpudiag_scan.so")
FIXTURE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch",
                                       "replica_train.py"))


def launch(out, *args, n=4):
    e = clean_env()
    e.pop("OMP_NUM_THREADS", None)
    e["PYTHON_EXEC"] = TORCH_PYTHON
    e["GPUDIAG_SCAN_LIB"] = LIB
    return run([BIN, "launch", "--nproc-per-node", str(n), "--master-port", str(free_port()), FIXTURE,
                "--out", out, *map(str, args)], env=e, timeout=300)


class Watch(unittest.TestCase):
    """One process: what watch() records and where the batch ends."""

    def test_an_inf_loss_outside_the_modules_stops_and_is_reported_at_its_batch(self):
        with tempfile.TemporaryDirectory() as d:
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
            dumper = dump_activations.ActivationDumper(model, d, lib=LIB)
            raised = None
            for step in range(30):
                loss = model(torch.randn(2, 4)).pow(2).mean()
                try:
                    dumper.watch("loss", loss * (float("inf") if step == 20 else 1.0))
                except FloatingPointError as e:
                    raised = str(e)
                    break
            dumper.close()
            self.assertIn("nan/inf in loss watch value in batch 20", raised)
            r = scan(d)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("Detected inf/nan during batch_number=20\n", r.stdout)
            self.assertTrue(r.stdout.rstrip("\n").endswith("                  loss watch\n     inf      inf value"),
                            r.stdout[-300:])
            with open(os.path.join(d, "batch-000019.stats.json")) as f:
                frames = json.load(f)["frames"]
            self.assertEqual([fr["class"] for fr in frames[-2:]], ["Sequential", "watch"])
            self.assertTrue(all(fr["time"] > 1e9 for fr in frames))


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class FourRanks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name
        self.dumps = os.path.join(self.out, "dumps")

    def tearDown(self):
        self.tmp.cleanup()

    def check_table(self, stdout, first_line, bad_rank, batch):
        lines = stdout.splitlines()
        self.assertEqual(lines[0], first_line)
        self.assertEqual(lines[1], "rank  batch  first inf/nan")
        for r in range(4):
            self.assertRegex(lines[2 + r], r"^ {3}%d {6}%d  frame \d+ " % (r, batch if r == bad_rank else batch + 1))
        self.assertEqual(re.findall(r"^--- rank (\d) ---$", stdout, re.M), ["0", "1", "2", "3"])

    def test_an_inf_fed_to_one_rank_is_attributed_to_it_and_its_batch(self):
        for mode in ("stats", "tensors"):
            with self.subTest(mode=mode):
                self.dumps = os.path.join(self.out, mode, "dumps")
                p = launch(os.path.join(self.out, mode), "--steps", 8, "--dump", mode, "--inf-rank", 2,
                           "--inf-step", 4)
                self.assertEqual(p.returncode, 0, p.stderr[-3000:])
                r = scan(self.dumps)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.check_table(r.stdout, "first inf/nan: rank 2, batch 4, frame 0 (module.0 Linear) input[0]", 2, 4)
                one = scan(self.dumps, "--rank", 2)
                self.assertEqual(one.returncode, 1)
                self.assertIn("Detected inf/nan during batch_number=4\n", one.stdout)
                self.assertIn("--- rank 2 ---\n" + one.stdout, r.stdout)
                js = scan(self.dumps, "--json", "-")
                doc = json.loads(js.stdout)
                self.assertEqual((doc["ranks"]["first"]["rank"], doc["ranks"]["first"]["batch_number"]), (2, 4))
                self.assertEqual(doc["ranks"]["first"]["also_ranks"], [])
                self.assertEqual([x["first"]["batch_number"] for x in doc["ranks"]["ranks"]], [5, 5, 4, 5])
                self.assertTrue(doc["result"]["inf_nan_found"])

    def test_a_loss_made_inf_outside_the_modules_is_caught_at_its_batch(self):
        p = launch(self.out, "--steps", 9, "--dump", "stats", "--inf-loss-rank", 1, "--inf-loss-step", 6)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        r = scan(self.dumps)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.check_table(r.stdout, "first inf/nan: rank 1, batch 6, frame 6 (loss watch) value", 1, 6)
        self.assertIn("Detected inf/nan during batch_number=6\n", scan(self.dumps, "--rank", 1).stdout)


if __name__ == "__main__":
    unittest.main()
