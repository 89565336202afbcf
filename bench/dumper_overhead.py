#!/usr/bin/env python3
"""Step-time overhead of watching a model's activations, side by side in one
run on Debian's torch (CPU): a training step of a small bf16 transformer-like
model with no hooks, with ActivationDumper(mode="stats") (libgpudiag_scan.so
through ctypes), with ActivationDumper(mode="tensors"), and with a
forward-hook detector doing the reference detector's per-tensor torch
operations (abs, min, max, isnan.any, isinf.any, each a host sync).

    bench/dumper_overhead.py [--steps 20] [--repeat 3] [--d 512] [--layers 4]

Prints a Markdown table: median step time over --repeat runs of --steps
steps (after warm-up), its spread, and the overhead over no hooks."""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import dump_activations  # noqa: E402


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d, layers):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class ReferenceOps:
    """What the reference detector computes per tensor, with its host syncs."""

    def __init__(self, model):
        self.handles = []
        model.apply(lambda m: self.handles.append(m.register_forward_hook(self.hook)))

    def look(self, t):
        if torch.is_tensor(t):
            a = t.detach().abs()
            f"{a.min():8.2e} {a.max():8.2e}"
            bool(torch.isnan(t).any()), bool(torch.isinf(t).any())

    def hook(self, module, inputs, output):
        for p in module.parameters(recurse=False):
            self.look(p)
        for x in (inputs if isinstance(inputs, tuple) else (inputs,)):
            self.look(x)
        for y in (output if isinstance(output, tuple) else (output,)):
            self.look(y)

    def close(self):
        for h in self.handles:
            h.remove()


def step_time(make_watcher, args, tmp):
    torch.manual_seed(0)
    model = Net(args.d, args.layers).to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.d, dtype=torch.bfloat16)
    watcher = make_watcher(model, tmp)
    times = []
    for i in range(args.steps + 2):
        t0 = time.perf_counter()
        model(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        if i >= 2:  # warm-up
            times.append(time.perf_counter() - t0)
    if watcher:
        watcher.close()
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()
    rows = [
        ("no hooks", lambda m, d: None),
        ("ActivationDumper stats", lambda m, d: dump_activations.ActivationDumper(
            m, d, keep_last=1, stop_on_nan=False)),
        ("reference detector ops", lambda m, d: ReferenceOps(m)),
        ("ActivationDumper tensors", lambda m, d: dump_activations.ActivationDumper(
            m, d, keep_last=1, mode="tensors", stop_on_nan=False)),
    ]
    results = {name: [] for name, _ in rows}
    for _ in range(args.repeat):
        for name, make in rows:
            with tempfile.TemporaryDirectory() as tmp:
                results[name].append(step_time(make, args, tmp))
    base = statistics.median(results["no hooks"])
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, d={args.d}, "
          f"layers={args.layers}, batch={args.batch}, bf16; median step of {args.steps}, "
          f"{args.repeat} runs")
    print("| watcher | step (ms) | runs (ms) | overhead over no hooks (ms) |")
    print("|---|---:|---|---:|")
    for name, _ in rows:
        m = statistics.median(results[name])
        spread = ", ".join(f"{t * 1e3:.1f}" for t in sorted(results[name]))
        print(f"| {name} | {m * 1e3:.1f} | {spread} | {(m - base) * 1e3:.1f} |")


if __name__ == "__main__":
    main()
