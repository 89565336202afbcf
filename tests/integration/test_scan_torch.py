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
        self.blocks[1].norm_2 = self.norm  # one module under two parents: hooked (and reported) twice
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            h = b(h)
        return self.lm_head(self.norm(h)), {"aux": None}


def train(model, steps, dumper_dir, detector_options, batches=None):
    """Trains until the detector stops the run; returns (detector, steps run)."""
    torch.manual_seed(1)
    dumper = dump_activations.ActivationDumper(model, dumper_dir, batches=batches, mode="tensors",
                                              stop_on_nan=False)
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


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} and the metadata, read back by hand."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}, meta


class Dumper(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_bf16_is_written_bit_exact_and_close_removes_the_hooks(self):
        bits = torch.tensor([0x7FC1, 0xFF80, 0x8000, 0x0001, 0x7F7F, 0x3F80], dtype=torch.int32)
        x = bits.to(torch.int16).view(torch.bfloat16)  # a NaN payload, -inf, -0, a subnormal, max, 1
        model = nn.Sequential(nn.Identity())
        dumper = dump_activations.ActivationDumper(model, self.dir, mode="tensors", stop_on_nan=False)
        model(x)
        dumper.close()
        model(x)  # no hooks left: no second file
        self.assertEqual(os.listdir(self.dir), ["batch-000000.safetensors"])
        tensors, meta = read_safetensors(os.path.join(self.dir, "batch-000000.safetensors"))
        # Each frame's recording time, then the entries.
        self.assertTrue(all(float(meta.pop(f"time.{i}")) > 1e9 for i in (0, 1)), meta)
        # Identity returns its input: one object, written once, referenced three times.
        self.assertEqual(meta, {"format": "gpudiag-frames/1", "batch_number": "0",
                                "0.1|0|Identity|output": "same as 0.0",
                                "1.0||Sequential|input[0]": "same as 0.0",
                                "1.1||Sequential|output": "same as 0.0"})
        self.assertEqual(sorted(tensors), ["0.0|0|Identity|input[0]"])
        dtype, shape, raw = tensors["0.0|0|Identity|input[0]"]
        self.assertEqual((dtype, shape), ("BF16", [6]))
        self.assertEqual(raw, x.view(torch.int16).numpy().astype("<i2").tobytes())

    def test_records_a_copy_at_hook_time(self):
        linear = nn.Linear(4, 4)
        with torch.no_grad():
            linear.weight.copy_(torch.eye(4))
            linear.bias.zero_()
        model = nn.Sequential(linear, nn.ReLU(inplace=True))
        with dump_activations.ActivationDumper(model, self.dir, mode="tensors"):
            model(torch.full((1, 4), -1.0))
        tensors, _ = read_safetensors(os.path.join(self.dir, "batch-000000.safetensors"))
        # ReLU zeroed the Linear's output in place after the Linear frame was recorded.
        self.assertEqual(tensors["0.3|0|Linear|output"][2], torch.full((4,), -1.0).numpy().tobytes())
        self.assertEqual(tensors["1.0|1|ReLU|input[0]"][2], bytes(16))  # its output is this object

    def test_parts_keep_last_and_an_unfinished_batch(self):
        model = TinyLM().to(torch.bfloat16)
        dumper = dump_activations.ActivationDumper(model, self.dir, keep_last=2, max_file_bytes=4096,
                                                  mode="tensors")
        detector = LiveDetector(model, trace_batches=[0, 1, 2, 3])
        for _ in range(3):
            model(torch.randint(0, 50, (2, 6)))
        model.blocks[1].ff.wo.weight.data.fill_(float("inf"))
        model.blocks[0](model.embed(torch.randint(0, 50, (2, 6))))  # batch 3 stops mid-forward
        detector.close()
        dumper.close()
        files = sorted(os.listdir(self.dir))
        self.assertFalse(any(f.startswith(("batch-000000", "batch-000001")) for f in files), files)
        self.assertTrue(any(f.startswith("batch-000002-part-001") for f in files), files)
        self.assertTrue(any(f.startswith("batch-000003") for f in files), files)
        r = scan(self.dir, "--trace-batches", "2,3")
        self.assertEqual(r.returncode, 0, r.stderr)
        live = detector.text()
        batch2 = live[live.index("\n\n                  *** Starting batch number=2 ***"):]
        self.assertEqual(r.stdout, batch2)


if __name__ == "__main__":
    unittest.main()
