#!/usr/bin/env python3
"""Host collectives side by side in one run: gpudiag bench on host memory
(`gpudiag launch -- bench OP --backend host`, the host/tcp backend) against
the two anchors users pick: Open MPI's MPI_Allreduce, MPI_Allgather and
MPI_Alltoall (bench/mpi_collectives.c) over its TCP transport (btl self,tcp,
loopback) and torch.distributed's Gloo (bench/gloo_collectives.py, Debian's
python3-torch, TCP on loopback), with Open MPI's shared-memory transport (btl
self,vader) shown; same ranks, sizes and iteration counts, the slowest rank's
mean time per call on every side (gpudiag's -a 3). Out of place, but Gloo's
all_reduce, which torch only has in place.

    bench/host_collectives.py [--ops all_reduce,all_gather,alltoall] [--ranks 2,4]
                              [--min 1MiB] [--max 256MiB] [--iters 10] [--repeat 3]
                              [--no-gloo]

Runs are interleaved (gpudiag, MPI tcp, Gloo, MPI shm, then again), so drift in
the machine hits every side alike. Prints a Markdown table per op and rank
count: busbw (GB/s, nccl-tests' definition) as the median of --repeat runs with
the min-max spread, and gpudiag / MPI tcp and gpudiag / Gloo as ratios of
medians with their worst case (gpudiag's slowest run against the anchor's
fastest)."""
import argparse
import json
import os
import statistics
import subprocess
import socket
import sys
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
            return {r["size"]: r["out_of_place"]["time"] / 1e6 for r in json.load(f)["results"]}


def open_mpi(op, n, a, btl, exe):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(["mpirun", "-np", str(n), "--oversubscribe", "--mca", "btl", btl,
                        "--mca", "btl_tcp_if_include", "lo", exe, MPI_OP[op], str(a.min), str(a.max),
                        str(a.iters), "2"], check=True, env=env, capture_output=True, text=True)
    return {int(b): float(s) for b, s in (l.split() for l in p.stdout.splitlines())}


def gloo(op, n, a):
    with socket.socket() as s:  # a free port for torch's env:// rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(n),
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "bench", "gloo_collectives.py"),
                               MPI_OP[op], str(a.min), str(a.max), str(a.iters), "2"],
                              env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for r in range(n)]
    out = [p.communicate(timeout=1800)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"gloo_collectives.py {op} failed at {n} ranks")
    return {int(b): float(s) for b, s in (l.split() for l in out[0].splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default="all_reduce,all_gather,alltoall")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--min", type=size, default=1 << 20)
    ap.add_argument("--max", type=size, default=256 << 20)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gloo", action="store_true", help="leave torch's Gloo out")
    a = ap.parse_args()
    if not a.no_gloo and subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"],
                                        capture_output=True).returncode != 0:
        print("torch is not installed (python3-torch): Gloo is left out", file=sys.stderr)
        a.no_gloo = True
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "mpi_collectives")
        subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "mpi_collectives.c")],
                       check=True)
        for n in map(int, a.ranks.split(",")):
            for op in a.ops.split(","):
                runs = {"gpudiag": [], "tcp": [], "gloo": [], "shm": []}
                for _ in range(a.repeat):
                    runs["gpudiag"].append(gpudiag(op, n, a))
                    runs["tcp"].append(open_mpi(op, n, a, "self,tcp", exe))
                    if not a.no_gloo:
                        runs["gloo"].append(gloo(op, n, a))
                    runs["shm"].append(open_mpi(op, n, a, "self,vader", exe))
                print(f"\n{op}, {n} ranks (busbw GB/s: median [min-max] of {a.repeat} runs)\n")
                print("| size | gpudiag host/tcp | Open MPI tcp | Gloo | Open MPI vader (shm) "
                      "| gpudiag / MPI tcp (worst) | gpudiag / Gloo (worst) |")
                print("|---:|---:|---:|---:|---:|---:|---:|")
                for b in sorted(runs["gpudiag"][0]):
                    bw = {k: sorted(b * factor(op, n) / r[b] / 1e9 for r in v if r.get(b))
                          for k, v in runs.items()}
                    cell = lambda x: f"{statistics.median(x):.2f} [{x[0]:.2f}-{x[-1]:.2f}]" if x else "-"
                    ratio = lambda g, t: (f"{statistics.median(g) / statistics.median(t):.2f}x "
                                          f"({g[0] / t[-1]:.2f}x)" if g and t else "-")
                    g = bw["gpudiag"]
                    print(f"| {b / (1 << 20):g} MiB | {cell(g)} | {cell(bw['tcp'])} | {cell(bw['gloo'])} "
                          f"| {cell(bw['shm'])} | {ratio(g, bw['tcp'])} | {ratio(g, bw['gloo'])} |",
                          flush=True)


if __name__ == "__main__":
    main()
