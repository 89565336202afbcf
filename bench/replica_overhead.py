#!/usr/bin/env python3
"""The cost of checking data-parallel replicas every step, beside its anchor,
in one run on Debian's torch (CPU): a training step (forward, backward, SGD)
of a fixed 100.7M-parameter fp32 model on a fixed batch, then, interleaved:

- no check;
- ReplicaCheck.step (scripts/replica_check.py): one 64-bit checksum per
  parameter through libgpudiag_scan.so, appended to its file, all-gathered;
- Megatron-LM's method as its check_param_hashes_across_dp_replicas states
  it: every parameter copied to the host (here: already there), SHA-1 of its
  bytes, the digests all-gathered and compared.

The process group is gloo with one rank (this host has two cores: a second
rank would halve the step), so the collectives are there but cost little.
Then the checksum's rate on the model's parameters against the CPU
scanner's (gpudiag_scan_host on the same tensors) and SHA-1's.

    bench/replica_overhead.py [--steps 1] [--repeat 3]

Prints Markdown tables: median step time and median time of each check,
measured around the check alone, and the median of its share of the step of
the same run."""

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpudiag_scan  # noqa: E402
from replica_check import ReplicaCheck  # noqa: E402

D, LAYERS = 1024, 12  # 12 x (2 x 1024 x 4096 + 4096 + 3 x 1024) = 100.7M parameters
BATCH, TOKENS = 4, 32  # the fixed batch: 128 tokens of width 1024 (a CPU step of this model
                       # takes tens of seconds with Debian's torch, whose BLAS is the generic one)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(D) for _ in range(LAYERS))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Sha1Check:
    """Megatron's method: SHA-1 of each parameter's bytes on the host, digests gathered."""

    def __init__(self, model):
        self.params = list(model.parameters())

    def step(self, step):
        mine = [hashlib.sha1(p.detach().cpu().contiguous().numpy()).digest() for p in self.params]
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        if any(d != every[0] for d in every):
            raise RuntimeError(f"replicas diverged at step {step}")


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1, help="steps per way per run (after one warm-up)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"), rank=0, world_size=1)
        torch.manual_seed(0)
        model = Net()
        n = sum(p.numel() for p in model.parameters())
        nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
        x = torch.randn(BATCH, TOKENS, D)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        checks = {"no check": None, "ReplicaCheck (gpudiag checksums)": ReplicaCheck(model, tmp),
                  "SHA-1 on the host (Megatron's method)": Sha1Check(model)}
        step_times, check_times = {k: [] for k in checks}, {k: [] for k in checks}

        def train_step():
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()

        train_step()  # warm-up
        step = 0
        for _ in range(args.repeat):
            for name, check in checks.items():  # interleaved
                steps, spent = [], []
                for _ in range(args.steps):
                    t = timed(train_step)
                    c = timed(lambda: check.step(step)) if check else 0.0
                    steps.append(t + c)
                    spent.append(c)
                    step += 1
                    print(f"{name}: step {t:.2f} s, check {c * 1e3:.1f} ms", file=sys.stderr, flush=True)
                step_times[name].append(statistics.median(steps))
                check_times[name].append(statistics.median(spent))
        print(f"model: {n / 1e6:.1f}M fp32 parameters ({nbytes / 2**20:.0f} MiB), batch {BATCH}x{TOKENS}x{D}, "
              f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
        print("| check | step with check (s) | check alone (ms) | runs of the check (ms) | check / step |")
        print("|---|---:|---:|---|---:|")
        for name in checks:
            c = statistics.median(check_times[name])
            runs = ", ".join(f"{v * 1e3:.1f}" for v in check_times[name])
            # The share of each run's own step (this host's step times drift between runs).
            share = statistics.median(ci / si for ci, si in zip(check_times[name], step_times[name]))
            print(f"| {name} | {statistics.median(step_times[name]):.2f} | {c * 1e3:.1f} | {runs} | "
                  f"{100 * share:.2f} % |")

        # Rates on the same tensors.
        lib = gpudiag_scan.load()
        params = [p.detach() for p in model.parameters()]
        ways = {"replica checksum (gpudiag_scan_checksums, every core)": lambda: lib.checksums(params),
                "CPU scanner (gpudiag_scan_host, every core)": lambda: [lib.scan(p) for p in params],
                "SHA-1 (hashlib, one core)": lambda: [hashlib.sha1(p.numpy()).digest() for p in params]}
        rates = {k: [] for k in ways}
        for _ in range(args.repeat):
            for name, f in ways.items():
                rates[name].append(nbytes / min(timed(f) for _ in range(3)) / 1e9)
        print(f"\n| on the model's {nbytes / 2**20:.0f} MiB | GB/s (median) | runs |")
        print("|---|---:|---|")
        for name, r in rates.items():
            print(f"| {name} | {statistics.median(r):.2f} | {', '.join(f'{v:.2f}' for v in r)} |")
        c, s, h = (statistics.median(r) for r in rates.values())
        print(f"\nchecksum / scanner: {c / s:.2f}x; checksum / SHA-1: {c / h:.1f}x")
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
