"""`gpudiag scan` against the reference detector itself: transformers'
DebugUnderflowOverflow, hooked on a real model that trains until its
activations overflow, prints its report; ActivationDumper records the same
run, as tensors and as statistics (mode="stats", CUDA tensors scanned where
they live through libgpudiag_scan.so); `gpudiag scan` on either dump must
print that report byte for byte, with the CPU scanner and (on a GPU) the
CUDA one.

Needs `transformers` for python3: skipped, and said so, where it is missing
(Debian's python3 has none). The model runs on the GPU when torch sees one
(fp16 and bf16), else on the CPU (bf16)."""

import contextlib
import io
import os
import tempfile
import unittest

import torch
import torch.nn as nn

from scanlib import dump_activations, scan

try:
    from transformers.debug_utils import DebugUnderflowOverflow
except ImportError as e:  # noqa: F841
    DebugUnderflowOverflow = None
    WHY = f"transformers is not importable for this python3 ({e.__class__.__name__})"
else:
    WHY = ""

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


class Net(nn.Module):
    """Linear / GELU / LayerNorm blocks with a tuple-returning layer, like a transformer's."""

    def __init__(self, d=32, layers=3):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                    for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 8)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        return self.head(self.norm(h)), None


def run(dtype, out_dir):
    """Trains until the real detector raises; returns what it printed."""
    torch.manual_seed(0)
    model = Net().to(DEVICE, dtype).train()
    # Both dumpers hook first, so they see every frame; neither stops the run.
    dumpers = [dump_activations.ActivationDumper(model, os.path.join(out_dir, mode), mode=mode,
                                                 stop_on_nan=False) for mode in ("tensors", "stats")]
    detector = DebugUnderflowOverflow(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    printed = io.StringIO()
    stopped = False
    try:
        with contextlib.redirect_stdout(printed):
            for _ in range(30):
                x = torch.randn(4, 32, device=DEVICE, dtype=dtype)
                y, _ = model(x)
                loss = y.float().pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():  # grow the blocks' output weights until something overflows
                    for b in model.blocks:
                        b[2].weight.mul_(40)
    except ValueError as e:
        stopped = "inf/nan detected" in str(e)
    finally:
        for d in dumpers:
            d.close()
    return printed.getvalue(), stopped


@unittest.skipIf(DebugUnderflowOverflow is None, WHY)
class RealDetector(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, dtype):
        out = os.path.join(self.tmp.name, str(dtype))
        printed, stopped = run(dtype, out)
        self.assertTrue(stopped, "the model never overflowed: the detector did not stop it")
        self.assertIn("Detected inf/nan during batch_number=", printed)
        devices = ["cpu", "cuda"] if CUDA else ["cpu"]
        # The stats dump was scanned at hook time, on the GPU for CUDA tensors.
        for dump, device in [("tensors", d) for d in devices] + [("stats", "cpu")]:
            with self.subTest(dtype=str(dtype), dump=dump, scanner=device):
                r = scan(os.path.join(out, dump), "--device", device)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stdout.splitlines(), printed.splitlines())
                self.assertEqual(r.stdout, printed)

    def test_bf16(self):
        self.check(torch.bfloat16)

    @unittest.skipUnless(CUDA, "fp16 training needs a GPU here (no CUDA device for torch)")
    def test_fp16(self):
        self.check(torch.float16)


if __name__ == "__main__":
    unittest.main()
