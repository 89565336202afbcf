#!/usr/bin/env python3
"""One link's bandwidth, side by side in one run: what `gpudiag bench --links`
measures for a pair of ranks over host/tcp, against the same exchange (both
directions at once, median of the timed iterations) done with Open MPI over its
TCP transport (btl self,tcp, the anchor) and its shared-memory one (self,vader).
Two ranks on this host, one size at a time.

    bench/link_bw.py [--min 1MiB] [--max 64MiB] [--iters 20] [--repeat 3]

Prints a Markdown table of GB/s each way per size (medians of --repeat
interleaved runs). The link test should measure the link, not itself: its
figure should match what the MPI library gets from the same link."""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from host_collectives import BIN, ROOT, size


def gpudiag_link(nbytes, a):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "links.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
        subprocess.run([BIN, "launch", "--nproc-per-node", "2", "--no-prefix", "--", "bench",
                        "--links", "--backend", "host", "--link-size", str(nbytes),
                        "--iters", str(a.iters), "--json", out], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["links"][0]["gbps"]


def open_mpi(a, btl, exe):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "--mca", "btl", btl,
                        "--mca", "btl_tcp_if_include", "lo", exe, str(a.min), str(a.max),
                        str(a.iters), "2"], check=True, env=env, capture_output=True, text=True)
    return {int(b): int(b) / float(s) / 1e9 for b, s in (l.split() for l in p.stdout.splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min", type=size, default=1 << 20)
    ap.add_argument("--max", type=size, default=64 << 20)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; medians are printed")
    a = ap.parse_args()
    sizes = []
    b = a.min
    while b <= a.max:
        sizes.append(b)
        b *= 2
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "mpi_pair")
        subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(ROOT, "bench", "mpi_pair.c")], check=True)
        runs = {"gpudiag": [], "tcp": [], "shm": []}
        for _ in range(a.repeat):  # interleaved, so drift in the machine hits all alike
            runs["gpudiag"].append({s: gpudiag_link(s, a) for s in sizes})
            runs["tcp"].append(open_mpi(a, "self,tcp", exe))
            runs["shm"].append(open_mpi(a, "self,vader", exe))
    med = {k: {s: statistics.median(r[s] for r in v) for s in sizes} for k, v in runs.items()}
    print("| size | gpudiag --links host/tcp | Open MPI tcp | gpudiag / MPI tcp | Open MPI vader (shm) |")
    print("|---:|---:|---:|---:|---:|")
    for s in sizes:
        g, t, m = med["gpudiag"][s], med["tcp"][s], med["shm"][s]
        print(f"| {s >> 20} MiB | {g:.2f} GB/s | {t:.2f} GB/s | {g / t:.2f}x | {m:.2f} GB/s |")


if __name__ == "__main__":
    main()
