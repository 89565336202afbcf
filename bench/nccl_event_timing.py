#!/usr/bin/env python3
"""gpudiag bench's NCCL timing against nccl-tests' way of timing, side by side in one
run, on one GPU: `gpudiag bench OP --backend nccl` (one rank; an event after every call,
one wait, the mean of the calls) and build/nccl_event_timing (bench/nccl_event_timing.cpp:
the same NCCL call queued ITERS times between two CUDA events, nothing of gpudiag in the
path). Both out of place, float, same sizes, iterations and warm-ups; interleaved runs.

    bench/nccl_event_timing.py [--ops all_reduce,...] [--min 64KiB] [--max 256MiB]
                               [--iters 50] [--warmup 5] [--repeat 3] [--tolerance 0.10]

Prints a Markdown table per op: the median time per call of each side over --repeat runs
and their ratio. From 1 MiB, where one call takes long enough for an event's own cost to
vanish, the ratio must stay within --tolerance of 1; exit 1 when it does not, 2 when no
GPU or NCCL is usable (the reason is printed)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from host_collectives import BIN, size

REF = os.path.join(os.path.dirname(BIN), "nccl_event_timing")
OPS = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv"


def gpudiag(op, a):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        p = subprocess.run([BIN, "bench", op, "--backend", "nccl", "-b", str(a.min), "-e", str(a.max),
                            "-n", str(a.iters), "-w", str(a.warmup), "-c", "0", "-J", out],
                           capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(out):
            sys.exit("gpudiag bench %s failed (exit %d): %s" % (op, p.returncode, p.stderr.strip()[-400:]))
        with open(out) as f:
            return {r["size"]: r["out_of_place"]["time"] / 1e6 for r in json.load(f)["results"]}


def reference(op, a):
    p = subprocess.run([REF, op, str(a.min), str(a.max), str(a.iters), str(a.warmup)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr.strip(), file=sys.stderr)
        sys.exit(2)
    return {int(b): float(s) for b, s in (l.split() for l in p.stdout.splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=OPS)
    ap.add_argument("--min", type=size, default=64 << 10)
    ap.add_argument("--max", type=size, default=256 << 20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.10)
    a = ap.parse_args()
    if not os.access(REF, os.X_OK):
        sys.exit("no %s: it is built with CUDA (scripts/build.sh on a machine with the toolkit)" % REF)
    off = []
    for op in a.ops.split(","):
        runs = {"gpudiag": [], "ref": []}
        for _ in range(a.repeat):
            runs["ref"].append(reference(op, a))
            runs["gpudiag"].append(gpudiag(op, a))
        print(f"\n{op}, 1 rank, out of place (us per call: median of {a.repeat} runs)\n")
        print("| size | two events around the loop | gpudiag bench | gpudiag / loop |")
        print("|---:|---:|---:|---:|")
        for b in sorted(runs["ref"][0]):
            g = statistics.median(r[b] for r in runs["gpudiag"] if b in r)
            t = statistics.median(r[b] for r in runs["ref"])
            ratio = g / t if t > 0 else float("inf")
            flag = ""
            if b >= 1 << 20 and abs(ratio - 1) > a.tolerance:
                off.append((op, b, ratio))
                flag = " (off)"
            print(f"| {b} | {t * 1e6:.2f} | {g * 1e6:.2f} | {ratio:.3f}{flag} |", flush=True)
    if off:
        print("\noutside %.0f%% from 1 MiB: %s" % (a.tolerance * 100,
              ", ".join(f"{op} {b} B {r:.3f}" for op, b, r in off)))
        sys.exit(1)
    print("\nevery size from 1 MiB within %.0f%% of the two-event loop" % (a.tolerance * 100))


if __name__ == "__main__":
    main()
