#!/usr/bin/env python3
"""The control plane at scale: build/gpudiag-sim (src/sim/simulator.h) runs N
simulated ranks through the check's 5 checkpoints with faults injected, in
two shapes side by side:
  - flat: one store, rank 0 the judge (up to --flat-upto ranks: the
    simulator's own process holds a socket per rank, 20,000 files here);
  - tree: node leaders (8 ranks a node), groups of 128 nodes under
    second-level judges, past 128 groups supergroups of 128 groups under
    third-level judges, one root; a leader that never reports, a group judge
    that dies after the communicator checkpoint and, with 3 levels, a
    supergroup judge whose host dies then (with its first group's judge and
    that group's first leader), on top of the ranks' faults (groups exist past
    128 nodes: at 1,024 ranks only the silent leader).
The anchor is PyTorch's TCPStore, whose libuv backend initialises 96k ranks
in about 100 s (PyTorch's own tutorial): a figure for joining only, not for
the five checkpoints measured here.

    bench/scale.py [--ranks 1024,4096,16384,65536,102400,262144] [--missing 3]
                   [--flat-upto 16384] [--runs 1] [--timeout S] [--touch]

With --runs K each run takes every size in turn (a machine slow for a few
minutes slows one run of each size), and a table gives the tree's time from
each size to the next, run by run and on the medians. --touch first says what
the machine charges for memory touched the first time: on a virtual machine
that backs a guest's pages only then, it is most of what a larger run costs
beyond its share.
Prints a Markdown table; the load column is this machine's 1-minute load
average before each run (it is shared: the times mean little without it).
Then, for the tree, every request the stores served (the simulator's
"sim: traffic at level L" lines: polls and retries too), per member of each
level a checkpoint and by checkpoint, which must stay flat as N grows (and,
in all, those of relays past a lost parent: a lost judge's children, which
report one level up and are not that level's members); a run
whose ranks named more ranks missing than were absent is marked (its judges'
waits ran out: the machine was too busy). The machine's limits (cores,
`ulimit -n`, ephemeral ports, somaxconn) come first, as the simulator read
them."""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIM = os.path.join(os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(ROOT, "build")), "gpudiag-sim")
LAST = re.compile(r"sim: (\d+) ranks, (\d+) checkpoints, ([\d.]+) s, store peak RSS (\d+) MiB "
                  r"\(all stores (\d+) MiB\), bytes through the store (\d+), missing named: "
                  r"(\d+)/(\d+)")
LEVELS = re.compile(r"ranks<->leaders ([\d.]+) MiB \((\d+) B a rank\), leaders<->parents "
                    r"([\d.]+) MiB \((\d+) B a node\), groups<->root ([\d.]+) MiB")
TRAFFIC = re.compile(r"^sim: traffic at level (\d+) \(([^)]+)\): a ([\w -]+?) (\d+) B in ([\d.]+) "
                     r"requests, .*; from past their parents (\d+) B in ([\d.]+) requests a "
                     r"checkpoint in all; .*'s by checkpoint: ([\d ]+), else (\d+)$", re.M)
MACHINE = re.compile(r"^sim: this machine: (.*)$", re.M)
WARNED = re.compile(r"^sim: warning: at the ([\w-]+) checkpoint a rank named (\d+) ranks missing "
                    r"where (\d+) were absent", re.M)
SHAPE = re.compile(r"(\d+) groups of \d+ nodes, (\d+) levels of judges; (\d+) processes of nodes "
                   r"\(peak RSS (\d+) MiB each at most\), (\d+) store processes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1024,4096,16384,65536,102400,262144")
    ap.add_argument("--missing", default="3")
    ap.add_argument("--flat-upto", type=int, default=16384)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout", help="the checkpoints' wait (the simulator's default: 2 s, or "
                    "a second per 40,000 ranks past 80,000), the same for every size")
    ap.add_argument("--touch", action="store_true",
                    help="first measure what this machine charges for memory touched the first "
                    "time (1.5 and 4 GiB over 8 processes)")
    a = ap.parse_args()
    if a.touch:
        print(first_touch_line(), flush=True)
    sizes = [int(x) for x in a.ranks.split(",")]
    cases = [(n, shape) for n in sizes for shape in (["flat"] if n <= a.flat_upto else []) + ["tree"]]
    # Run by run, every size in turn: a machine that slows down for a few
    # minutes slows one run of each size, not every run of one, and the
    # ratio of two sizes is taken within one run.
    results = {c: [] for c in cases}  # (seconds, load, the run's match, stderr)
    for run in range(a.runs):
        for n, shape in cases:
            load = os.getloadavg()[0]
            cmd = [SIM, "--ranks", str(n), "--missing", a.missing]
            if a.timeout:
                cmd += ["--timeout", a.timeout]
            if shape == "flat":
                cmd.append("--flat")
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            m = LAST.search(p.stdout)
            if not m:
                sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
            results[(n, shape)].append((float(m.group(3)), load, m, p.stderr))
            print(f"run {run + 1}: {n} ranks ({shape}): {float(m.group(3)):.1f} s", file=sys.stderr,
                  flush=True)
    traffic = []  # (n, the last run's stderr) for the second table
    print("| ranks | shape | time | load | largest store process RSS (all) | per checkpoint: "
          "rank<->leader | leader<->parent | group<->parent | through one store (flat) | "
          "missing named |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, shape in cases:
        runs = results[(n, shape)]
        times, loads = [r[0] for r in runs], [r[1] for r in runs]
        m, err = runs[-1][2], runs[-1][3]
        _, cps, _, rss, total_rss, total, named, of = m.groups()
        # Every run's time: one slow run in a few is the news on a shared machine.
        when = ", ".join(f"{t:.1f}" for t in times) + " s"
        load = f"{min(loads):.1f}-{max(loads):.1f}" if len(loads) > 1 else f"{loads[0]:.1f}"
        if shape == "flat":
            print(f"| {n} | flat | {when} | {load} | {rss} MiB | - | - | - | "
                  f"{int(total) / int(cps) / 2**20:.1f} MiB | {named}/{of} |", flush=True)
            continue
        traffic.append((n, err))
        lv = LEVELS.search(err)
        sh = SHAPE.search(err)
        groups = f"{sh.group(1)} groups, " if sh and sh.group(1) != "0" else ""
        if sh and int(sh.group(2)) >= 2:
            groups = f"{sh.group(1)} groups in {-(-int(sh.group(1)) // 128)} supergroups, "
        wait = f", --timeout {a.timeout}" if a.timeout else ""
        print(f"| {n} | tree ({groups}{n // 8} nodes{wait}) | {when} | {load} | {rss} MiB ({total_rss} MiB) | "
              f"{lv.group(1)} MiB ({lv.group(2)} B a rank) | {lv.group(3)} MiB ({lv.group(4)} B "
              f"a node) | {lv.group(5)} MiB | - | {named}/{of} |", flush=True)
    print_growth(sizes, results)
    print_traffic(traffic)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def print_growth(sizes, results):
    """The tree's time from each size to the next, run by run and on the medians."""
    tree = [n for n in sizes if results.get((n, "tree"))]
    if len(tree) < 2:
        return
    print("\n| from | to | ranks | time, run by run | on the medians |\n|---:|---:|---:|---|---:|")
    for a, b in zip(tree, tree[1:]):
        ta, tb = [r[0] for r in results[(a, "tree")]], [r[0] for r in results[(b, "tree")]]
        each = ", ".join(f"{y / x:.2f}" for x, y in zip(ta, tb))
        print(f"| {a} | {b} | {b / a:.2f}x | {each} | {median(tb) / median(ta):.2f}x |", flush=True)


def first_touch_line():
    """What this machine charges for memory a process touches the first time
    (a virtual machine's host backs a guest's pages only then): 8 processes
    write a byte a page of 192 MiB each, then of 512 MiB each."""
    out = []
    for mib in (192, 512):
        t0 = time.monotonic()
        kids = []
        for _ in range(8):
            pid = os.fork()
            if pid == 0:
                b = bytearray(mib << 20)
                b[::4096] = b"\x01" * len(range(0, mib << 20, 4096))
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        out.append(f"{8 * mib / 1024:.1f} GiB in {time.monotonic() - t0:.1f} s")
    return "Fresh memory's first touch here (8 processes, a byte a page): " + ", ".join(out)


def print_traffic(runs):
    """Every level's requests a member a checkpoint (the last run of each size)."""
    if not runs:
        return
    machine = MACHINE.search(runs[-1][1])
    if machine:
        print(f"\nThe machine (as the simulator read it before the last run): {machine.group(1)}")
    depth = max(len(TRAFFIC.findall(err)) for _, err in runs)
    print("\nEvery request the stores served, a member of each level a checkpoint "
          "(by checkpoint: exchange/communicator/all-reduce/barrier/report):\n")
    print("| ranks | " + " | ".join(f"level {lv}" for lv in range(depth)) +
          " | named beyond the absent |")
    print("|---:|" + "---:|" * depth + "---|")
    for n, err in runs:
        cells = []
        for lv, stores, member, b, req, past_b, past_req, cps, _ in TRAFFIC.findall(err):
            # Relays past a lost parent (its children, reporting a level up) apart.
            past = f"; past lost parents {past_b} B in {past_req} requests in all" if past_b != "0" else ""
            cells.append(f"{stores}: {b} B a {member} ({'/'.join(cps.split())}), {req} requests{past}")
        cells += ["-"] * (depth - len(cells))
        warned = ", ".join(f"{w[0]}: {w[1]} named, {w[2]} absent" for w in WARNED.findall(err))
        print(f"| {n} | " + " | ".join(cells) + f" | {warned or 'none'} |", flush=True)


if __name__ == "__main__":
    main()
