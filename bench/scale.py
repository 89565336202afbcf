#!/usr/bin/env python3
"""The control plane at scale: build/gpudiag-sim (src/sim/simulator.h) runs N
simulated ranks through the check's 5 checkpoints against a real store, with
faults injected, at 1k, 4k and 16k ranks: with the digest, and (up to
--all-to-all-upto ranks) with every rank reading every record, as checkpoints
did before it (gpudiag-sim --all-to-all).

    bench/scale.py [--ranks 1024,4096,16384] [--missing 3 --stop 2 --die 2]
                   [--all-to-all-upto 4096]

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
    ap.add_argument("--all-to-all-upto", type=int, default=4096)
    a = ap.parse_args()
    print("| ranks | checkpoint | faults (missing/stop/die) | checkpoints | time | store peak RSS | "
          "bytes through the store | per checkpoint | missing named |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in a.ranks.split(",")]:
        for mode in ["digest"] + (["all-to-all (before)"] if n <= a.all_to_all_upto else []):
            cmd = [SIM, "--ranks", str(n), "--missing", a.missing, "--stop", a.stop, "--die", a.die,
                   "--timeout", a.timeout, "--record-bytes", str(RECORD)]
            if mode != "digest":
                cmd.append("--all-to-all")
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            m = LAST.search(p.stdout)
            if not m:
                sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
            _, cps, secs, rss, total, named, of = m.groups()
            per_cp = int(total) / int(cps)
            print(f"| {n} | {mode} | {a.missing}/{a.stop}/{a.die} | {cps} | {float(secs):.1f} s | "
                  f"{rss} MiB | {int(total) / 2**20:.1f} MiB | {per_cp / 2**20:.2f} MiB | "
                  f"{named}/{of} |", flush=True)


if __name__ == "__main__":
    main()
