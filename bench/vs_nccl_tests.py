#!/usr/bin/env python3
"""gpudiag bench against nccl-tests itself, side by side in one run on one GPU: for each OP,
nccl-tests' OP_perf (built from its repository beforehand, never committed: NCCL_TESTS names
the folder of its binaries) and `gpudiag bench OP`, both with the same command line
(-b -e -f -n -w, -c 0, one GPU), interleaved --repeat times. Both outputs are read the way
the scripts that consume nccl-tests read them: the text table's rows (size, count, type,
redop, root, then the out-of-place time in us), so this also checks that gpudiag's table
parses as nccl-tests' does.

    NCCL_TESTS=DIR bench/vs_nccl_tests.py [--ops all_reduce,...] [-b 8] [-e 1G] [-f 4]
                                          [-n 20] [-w 5] [--repeat 3]

Prints a Markdown table per op (median out-of-place us of each side, the difference, the
ratio) and exits 1 when a size differs by more than 5% and more than 2 us, 2 when a side
cannot run (the reason is printed)."""
import argparse
import os
import statistics
import subprocess
import sys

from host_collectives import BIN

OPS = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv"


def rows(text):
    """{size: out-of-place us} from nccl-tests' text table."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 6 or line.lstrip().startswith("#") or not f[0].isdigit():
            continue
        try:
            out[int(f[0])] = float(f[5])
        except ValueError:
            continue
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    r = rows(p.stdout)
    if p.returncode != 0 or not r:
        print("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode,
                                           (p.stderr or p.stdout).strip()[-600:]), file=sys.stderr)
        sys.exit(2)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=OPS)
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="1G")
    ap.add_argument("-f", default="4")
    ap.add_argument("-n", default="20")
    ap.add_argument("-w", default="5")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    ref_dir = os.environ.get("NCCL_TESTS", "")
    common = ["-b", a.b, "-e", a.e, "-f", a.f, "-n", a.n, "-w", a.w, "-c", "0"]
    off = []
    for op in a.ops.split(","):
        ref = os.path.join(ref_dir, op + "_perf")
        if not os.access(ref, os.X_OK):
            sys.exit("no %s: build nccl-tests (make MPI=0) and set NCCL_TESTS to its build folder" % ref)
        ours, theirs = [], []
        for _ in range(a.repeat):
            theirs.append(run([ref, "-g", "1"] + common))
            ours.append(run([BIN, "bench", op, "--backend", "nccl"] + common))
        print(f"\n{op}, 1 rank, out of place (us: median of {a.repeat} runs)\n")
        print("| size (B) | nccl-tests | gpudiag bench | difference | gpudiag / nccl-tests |")
        print("|---:|---:|---:|---:|---:|")
        for b in sorted(theirs[0]):
            t = statistics.median(r[b] for r in theirs if b in r)
            mine = [r[b] for r in ours if b in r]
            if not mine:
                off.append((op, b, "missing"))
                print(f"| {b} | {t:.2f} | missing | | |")
                continue
            g = statistics.median(mine)
            d = g - t
            flag = ""
            if abs(d) > 2 and abs(d) > 0.05 * t:
                off.append((op, b, f"{d:+.2f} us"))
                flag = " (off)"
            print(f"| {b} | {t:.2f} | {g:.2f} | {d:+.2f} | {g / t if t else 0:.3f}{flag} |", flush=True)
    if off:
        print("\noutside 5%% or 2 us: %s" % ", ".join(f"{op} {b} B {d}" for op, b, d in off))
        sys.exit(1)
    print("\nevery size within 5% or 2 us of nccl-tests")


if __name__ == "__main__":
    main()
