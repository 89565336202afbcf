#!/usr/bin/env python3
"""The control plane at scale: build/gpudiag-sim (src/sim/simulator.h) runs N
simulated ranks through the check's 5 checkpoints against a real store, with
faults injected, at 1k, 4k and 16k ranks. Beside each measured row, the bytes
the all-to-all checkpoint (every rank reading every record, before the digest)
would have moved: n^2 x record per checkpoint.

    bench/scale.py [--ranks 1024,4096,16384] [--missing 3 --stop 2 --die 2]

Prints a Markdown table."""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIM = os.path.join(os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(ROOT, "build")), "gpudiag-sim")
LAST = re.compile(r"sim: (\d+) ranks, (\d+) checkpoints, ([\d.]+) s, store peak RSS (\d+) MiB, "
                  r"bytes through the store (\d+), missing named: (\d+)/(\d+)")
RECORD = 600


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1024,4096,16384")
    ap.add_argument("--missing", default="3")
    ap.add_argument("--stop", default="2")
    ap.add_argument("--die", default="2")
    ap.add_argument("--timeout", default="1")
    a = ap.parse_args()
    print("| ranks | faults (missing/stop/die) | checkpoints | time | store peak RSS | bytes through "
          "the store | per checkpoint | all-to-all per checkpoint (before) | missing named |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in a.ranks.split(",")]:
        p = subprocess.run([SIM, "--ranks", str(n), "--missing", a.missing, "--stop", a.stop,
                            "--die", a.die, "--timeout", a.timeout, "--record-bytes", str(RECORD)],
                           capture_output=True, text=True, timeout=600)
        m = LAST.search(p.stdout)
        if not m:
            sys.exit(f"gpudiag-sim --ranks {n} failed ({p.returncode}): {p.stderr[-2000:]}")
        _, cps, secs, rss, total, named, of = m.groups()
        per_cp = int(total) / int(cps)
        before = n * n * RECORD
        print(f"| {n} | {a.missing}/{a.stop}/{a.die} | {cps} | {float(secs):.1f} s | {rss} MiB | "
              f"{int(total) / 2**20:.1f} MiB | {per_cp / 2**20:.2f} MiB | {before / 2**30:.1f} GiB | "
              f"{named}/{of} |", flush=True)


if __name__ == "__main__":
    main()
