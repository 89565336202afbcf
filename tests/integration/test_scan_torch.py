"""A real PyTorch model (CPU, bf16) trained a few steps until its activations
overflow: ActivationDumper writes the dump, `gpudiag scan` must find the
first inf and print, line for line, what a live forward-hook detector
printed during the same run."""

import json
import os
import tempfile
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from scanlib import DetectorStop, LiveDetector, dump_activations, scan


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(var + 1e-6)).to(x.dtype)


class GatedFF(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.wi_0 = nn.Linear(d, ff, bias=False)
        self.wi_1 = nn.Linear(d, ff, bias=False)
        self.wo = nn.Linear(ff, d, bias=False)
        self.dropout = nn.Dropout(0.1)

    def forward(self, h):
        h = F.gelu(self.wi_0(h)) * self.wi_1(h)
        return self.wo(self.dropout(h))


class Attention(nn.Module):
    """Returns a tuple with a None, like attention layers without a cache."""

    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)

    def forward(self, h):
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        w = torch.softmax((q @ k.transpose(-1, -2)).float() / 4, dim=-1).to(h.dtype)
        return self.o(w @ v), None, w


class Block(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.norm_1 = RMSNorm(d)
        self.attn = Attention(d)
        self.norm_2 = RMSNorm(d)
        self.ff = GatedFF(d, ff)

    def forward(self, h):
        a, _, _ = self.attn(self.norm_1(h))
        h = h + a
        return h + self.ff(self.norm_2(h))


class TinyLM(nn.Module):
    def __init__(self, vocab=50, d=16, ff=64, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, ff) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            h = b(h)
        return self.lm_head(self.norm(h)), {"aux": None}


def train(model, steps, dumper_dir, detector_options, batches=None):
    """Trains until the detector stops the run; returns (detector, steps run)."""
    torch.manual_seed(1)
    dumper = dump_activations.ActivationDumper(model, dumper_dir, batches=batches)
    detector = LiveDetector(model, **detector_options)  # hooks after the dumper's: the dumper sees every frame
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    step = 0
    try:
        for step in range(steps):
            ids = torch.randint(0, 50, (2, 6))
            logits, _ = model(ids)
            loss = logits.float().logsumexp(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():  # push the feed-forward weights up every step
                for b in model.blocks:
                    b.ff.wo.weight.mul_(1e9)
                    b.ff.wi_1.weight.mul_(1e9)
    except DetectorStop:
        pass
    finally:
        detector.close()
        dumper.close()
    return detector, step


class RealModel(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def model(self):
        torch.manual_seed(0)
        return TinyLM().to(torch.bfloat16).train()

    def test_scan_finds_the_first_inf_like_the_live_detector(self):
        out = os.path.join(self.tmp.name, "dump")
        detector, step = train(self.model(), 20, out, {})
        live = detector.text()
        self.assertIn("Detected inf/nan during batch_number=", live)
        self.assertGreater(step, 0)  # at least one clean batch before the overflow
        self.assertTrue(any(f.endswith(".safetensors") for f in os.listdir(out)))
        js = os.path.join(self.tmp.name, "scan.json")
        r = scan(out, "--json", js)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout.splitlines(), live.splitlines())
        self.assertEqual(r.stdout, live)
        with open(js) as f:
            first = json.load(f)["result"]["first"]
        has_line = next(line for line in live.splitlines() if line.endswith((" has infs", " has nans")))
        self.assertEqual(first["batch_number"], step)
        self.assertTrue(has_line.startswith(first["label"] + " has "), (has_line, first))

    def test_max_frames_and_tracing_a_batch(self):
        out = os.path.join(self.tmp.name, "dump")
        detector, _ = train(self.model(), 20, out, {"max_frames": 7, "trace_batches": [1]})
        r = scan(out, "--max-frames", "7", "--trace-batches", "1")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("*** Starting batch number=1 ***", r.stdout)
        self.assertEqual(r.stdout, detector.text())

    def test_dumper_records_only_the_chosen_batches(self):
        out = os.path.join(self.tmp.name, "dump")
        detector, _ = train(self.model(), 3, out, {"trace_batches": [1], "abort_after": 1}, batches=[1])
        self.assertEqual(sorted(os.listdir(out)), ["batch-000001.safetensors"])
        r = scan(out, "--trace-batches", "1", "--abort-after-batch", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, detector.text())


if __name__ == "__main__":
    unittest.main()
