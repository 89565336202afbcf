#!/usr/bin/env python3
"""The cost of `gpudiag launch --stragglers` on a DDP job, beside the same job
without it, on Debian's torch (CPU, gloo): an MLP of `--params` parameters
(fp32, DDP's default 25 MiB buckets), a fixed batch, forward, backward, SGD and
a loss all_reduce per step, `--ranks` ranks. Each run times its steps after a
warm-up (rank 0's wall clock, steps between two barriers); the runs with and
without the flag alternate, `--repeat` times each.

    bench/stragglers_overhead.py [--ranks 2] [--params 8000000] [--steps 60] [--repeat 3]

Prints a Markdown table: the median step time of each run, and the median
cost of the flag as a share of the step."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("GPUDIAG_BIN", os.path.join(HERE, "..", "build", "gpudiag"))

JOB = r'''
import os, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
SENT = []
params, steps = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("gloo")
torch.manual_seed(0)
width = max(16, int((params / 2) ** 0.5))
model = DDP(torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width)))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(32, width)
def step():
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    t = loss.detach().clone()
    SENT.append(t)
    dist.all_reduce(t)
for _ in range(5):
    step()
dist.barrier()
t0 = time.perf_counter()
for _ in range(steps):
    step()
dist.barrier()
if dist.get_rank() == 0:
    print("step_ms %.4f" % ((time.perf_counter() - t0) * 1000 / steps), flush=True)
dist.destroy_process_group()
'''


def run(job, args, stragglers):
    env = dict(os.environ, PYTHON_EXEC=os.environ.get("PYTHON_EXEC", "/usr/bin/python3"))
    cmd = [BIN, "launch", "--nproc-per-node", str(args.ranks)] + (["--stragglers"] if stragglers else [])
    p = subprocess.run(cmd + [job, str(args.params), str(args.steps)], capture_output=True, text=True,
                       env=env, timeout=900)
    m = re.search(r"step_ms ([\d.]+)", p.stdout)
    if p.returncode != 0 or not m:
        sys.exit("run failed:\n" + p.stdout[-2000:] + p.stderr[-2000:])
    if stragglers and "straggler: rank" in p.stderr:
        print("note: a rank was named in a run with the flag:", file=sys.stderr)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--params", type=int, default=8000000)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gpudiag-stragglers-bench-")
    job = os.path.join(d, "ddp_job.py")
    with open(job, "w") as f:
        f.write(JOB)
    base, flag = [], []
    for _ in range(args.repeat):
        base.append(run(job, args, False))
        flag.append(run(job, args, True))
    shares = [(f - b) / b * 100 for b, f in zip(base, flag)]
    print(f"| ranks | parameters | step without (ms) | step with --stragglers (ms) | cost (median of pairs) |")
    print("|---|---|---|---|---|")
    print(f"| {args.ranks} | {args.params:,} | {statistics.median(base):.2f} | "
          f"{statistics.median(flag):.2f} | {statistics.median(shares):+.2f}% |")
    print("runs without: " + ", ".join("%.2f" % v for v in base))
    print("runs with:    " + ", ".join("%.2f" % v for v in flag))


if __name__ == "__main__":
    main()
