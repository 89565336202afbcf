#!/usr/bin/env python3
"""Host all-reduce bandwidth, side by side in one run: gpudiag's host/tcp ring
(`gpudiag launch -- bench --backend host`) against Open MPI's MPI_Allreduce
over its TCP transport (btl self,tcp) and its shared-memory one (btl
self,vader), same ranks, sizes and iteration counts.

    bench/host_allreduce.py [--ranks 2] [--min 1MiB] [--max 256MiB] [--iters 10]

Prints a Markdown table of busbw (GB/s, nccl-tests' definition) per size,
from the median time of --repeat interleaved runs of each side."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GPUDIAG_BIN", os.path.join(ROOT, "build", "gpudiag"))


def size(s):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if s.endswith(u):
            return int(s[: -len(u)]) * m
    return int(s)


def busbw(nbytes, seconds, n):
    return nbytes / seconds / 1e9 * 2 * (n - 1) / n if seconds > 0 else 0.0


def gpudiag_ring(a):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
        subprocess.run([BIN, "launch", "--nproc-per-node", str(a.ranks), "--no-prefix", "--", "bench",
                        "--backend", "host", "--min", str(a.min), "--max", str(a.max),
                        "--iters", str(a.iters), "--json", out], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            return {int(r["bytes"]): r["seconds"] for r in json.load(f)["sizes"]}


def open_mpi(a, btl, exe):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(["mpirun", "-np", str(a.ranks), "--oversubscribe", "--mca", "btl", btl,
                        "--mca", "btl_tcp_if_include", "lo", exe, str(a.min), str(a.max),
                        str(a.iters), "2"], check=True, env=env, capture_output=True, text=True)
    return {int(b): float(s) for b, s in (l.split() for l in p.stdout.splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--min", type=size, default=1 << 20)
    ap.add_argument("--max", type=size, default=256 << 20)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; medians are printed")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "mpi_allreduce")
        subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "mpi_allreduce.c")], check=True)
        runs = {"ring": [], "tcp": [], "shm": []}
        for _ in range(a.repeat):  # interleaved, so drift in the machine hits all alike
            runs["ring"].append(gpudiag_ring(a))
            runs["tcp"].append(open_mpi(a, "self,tcp", exe))
            runs["shm"].append(open_mpi(a, "self,vader", exe))
        med = {k: {b: statistics.median(r[b] for r in v) for b in v[0]} for k, v in runs.items()}
        ring, tcp, shm = med["ring"], med["tcp"], med["shm"]
    n = a.ranks
    print(f"| size | gpudiag host/tcp busbw | Open MPI tcp busbw | Open MPI vader (shm) busbw | ring / MPI tcp |")
    print("|---:|---:|---:|---:|---:|")
    for b in sorted(ring):
        r, t, s = busbw(b, ring[b], n), busbw(b, tcp.get(b, 0), n), busbw(b, shm.get(b, 0), n)
        ratio = f"{r / t:.2f}x" if t else "-"
        print(f"| {b >> 20} MiB | {r:.2f} GB/s | {t:.2f} GB/s | {s:.2f} GB/s | {ratio} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
