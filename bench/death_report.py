#!/usr/bin/env python3
"""What a job says when one of its ranks is killed, side by side in one run:
`gpudiag launch -- check` against the same check under `mpirun` (the anchor),
N ranks on this host. Rank 1 gets SIGKILL during the timed all-reduce; we time
how long the launcher takes to exit after the kill and count the survivors'
status lines that name rank 1.

    bench/death_report.py [--ranks 4,16] [--repeat 3]

Prints a Markdown table of medians."""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import BIN, clean_env, mpirun_env  # noqa: E402

CHECK = ["check", "--size", "64MiB", "--iters", "1000", "--mem", "1MiB", "--timeout", "20"]


def kids_of(n, rank_var):
    """{rank: pid} of the n ranks running CHECK, read from their environment."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = {}
        out = subprocess.run(["pgrep", "-f", " ".join(CHECK)], capture_output=True, text=True).stdout
        for pid in map(int, out.split()):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
                found[int(env[rank_var.encode()])] = pid
            except (OSError, KeyError, ValueError):
                pass
        if len(found) == n:
            return found
        time.sleep(0.1)
    raise RuntimeError("ranks did not start")


def one(cmd, env, n, rank_var):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kids = kids_of(n, rank_var)
    time.sleep(2.0)
    os.kill(kids[1], signal.SIGKILL)
    t0 = time.monotonic()
    out, _ = p.communicate(timeout=120)
    took = time.monotonic() - t0
    named = sum(1 for l in out.splitlines() if "is broken:" in l and "rank 1 " in l)
    return took, named


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="4,16")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print("| ranks | gpudiag launch: exit after kill | survivors naming rank 1 | mpirun: exit after kill | survivors naming rank 1 |")
    print("|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in a.ranks.split(",")):
        runs = {"launch": [], "mpirun": []}
        for _ in range(a.repeat):  # interleaved
            runs["launch"].append(one([BIN, "launch", "--nproc-per-node", str(n), "--", *CHECK],
                                      clean_env(), n, "RANK"))
            runs["mpirun"].append(one(["mpirun", "-np", str(n), "--oversubscribe", BIN, *CHECK],
                                      mpirun_env(), n, "OMPI_COMM_WORLD_RANK"))
        cells = []
        for k in ("launch", "mpirun"):
            cells.append(f"{statistics.median(t for t, _ in runs[k]):.2f} s")
            cells.append(f"{statistics.median(c for _, c in runs[k]):.0f} of {n - 1}")
        print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
