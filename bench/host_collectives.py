#!/usr/bin/env python3
"""Host collectives side by side in one run: gpudiag bench on host memory
(`gpudiag launch -- bench OP --backend host`, the host/tcp backend) against
Open MPI's MPI_Allreduce, MPI_Allgather and MPI_Alltoall (bench/mpi_collectives.c)
over its TCP transport (btl self,tcp, loopback) and its shared-memory one (btl
self,vader, shown), same ranks, sizes and iteration counts, out of place, the
slowest rank's mean time per call on both sides (gpudiag's -a 3).

    bench/host_collectives.py [--ops all_reduce,all_gather,alltoall] [--ranks 2,4]
                              [--min 1MiB] [--max 256MiB] [--iters 10] [--repeat 3]

Runs are interleaved (gpudiag, MPI tcp, MPI shm, then again), so drift in the
machine hits every side alike. Prints a Markdown table per op and rank count:
busbw (GB/s, nccl-tests' definition) as the median of --repeat runs with the
min-max spread, and gpudiag / MPI tcp as the ratio of medians with its worst case
(gpudiag's slowest run against MPI's fastest)."""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GPUDIAG_BIN", os.path.join(ROOT, "build", "gpudiag"))
MPI_OP = {"all_reduce": "allreduce", "all_gather": "allgather", "alltoall": "alltoall"}


def size(s):
    for u, m in {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "K": 1 << 10, "M": 1 << 20}.items():
        if s.endswith(u):
            return int(s[: -len(u)]) * m
    return int(s)


def factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def gpudiag(op, n, a):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
        subprocess.run([BIN, "launch", "--nproc-per-node", str(n), "--", "bench", op,
                        "--backend", "host", "-b", str(a.min), "-e", str(a.max), "-n", str(a.iters),
                        "-w", "2", "-a", "3", "-c", "0", "-J", out], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            return {r["size"]: r["out_of_place"]["time_us"] / 1e6 for r in json.load(f)["results"]}


def open_mpi(op, n, a, btl, exe):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(["mpirun", "-np", str(n), "--oversubscribe", "--mca", "btl", btl,
                        "--mca", "btl_tcp_if_include", "lo", exe, MPI_OP[op], str(a.min), str(a.max),
                        str(a.iters), "2"], check=True, env=env, capture_output=True, text=True)
    return {int(b): float(s) for b, s in (l.split() for l in p.stdout.splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default="all_reduce,all_gather,alltoall")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--min", type=size, default=1 << 20)
    ap.add_argument("--max", type=size, default=256 << 20)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "mpi_collectives")
        subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "mpi_collectives.c")],
                       check=True)
        for n in map(int, a.ranks.split(",")):
            for op in a.ops.split(","):
                runs = {"gpudiag": [], "tcp": [], "shm": []}
                for _ in range(a.repeat):
                    runs["gpudiag"].append(gpudiag(op, n, a))
                    runs["tcp"].append(open_mpi(op, n, a, "self,tcp", exe))
                    runs["shm"].append(open_mpi(op, n, a, "self,vader", exe))
                print(f"\n{op}, {n} ranks (busbw GB/s: median [min-max] of {a.repeat} runs)\n")
                print("| size | gpudiag host/tcp | Open MPI tcp | Open MPI vader (shm) | gpudiag / MPI tcp (worst) |")
                print("|---:|---:|---:|---:|---:|")
                for b in sorted(runs["gpudiag"][0]):
                    bw = {k: sorted(b * factor(op, n) / r[b] / 1e9 for r in v if r.get(b))
                          for k, v in runs.items()}
                    cell = lambda x: f"{statistics.median(x):.2f} [{x[0]:.2f}-{x[-1]:.2f}]" if x else "-"
                    g, t = bw["gpudiag"], bw["tcp"]
                    ratio = (f"{statistics.median(g) / statistics.median(t):.2f}x ({g[0] / t[-1]:.2f}x)"
                             if g and t else "-")
                    print(f"| {b / (1 << 20):g} MiB | {cell(g)} | {cell(t)} | {cell(bw['shm'])} | {ratio} |",
                          flush=True)


if __name__ == "__main__":
    main()
