#!/usr/bin/env python3
"""Time from start to all-OK for `gpudiag check` with N ranks on this machine,
started by `gpudiag launch` and by `mpirun`, side by side in one run.

    bench/launch_vs_mpirun.py [--ranks 8,64,256] [--repeat 3]

Each run uses the host backend with tiny buffers (--mem 4KiB --size 4KiB
--iters 0), so what is measured is process start, rendezvous, the checkpoints
and the collectives' set-up, not bandwidth. "all OK" is the moment the last
"is OK" line arrives on the launcher's stdout; "exit" is when the launcher
exits. Prints a Markdown table of medians. A run where every rank printed OK
but the launcher exited non-zero (Open MPI's runtime does so now and then with
hundreds of ranks on two cores) is still timed, and counted in a note."""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("GPUDIAG_BIN", os.path.join(ROOT, "build", "gpudiag"))
CHECK = ["check", "--backend", "host", "--mem", "4KiB", "--size", "4KiB", "--iters", "0",
         "--timeout", "600"]


def timed(cmd, n, env):
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    oks, all_ok = 0, None
    for line in p.stdout:
        if " is OK (global rank: " in line:
            oks += 1
            if oks == n:
                all_ok = time.monotonic() - start
    p.wait()
    if all_ok is None:
        raise SystemExit(f"{cmd[0]} with {n} ranks failed (exit {p.returncode}, {oks} OK lines)")
    return all_ok, time.monotonic() - start, p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="8,64,256")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
    mpi_env = dict(base, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")
    print("| ranks | gpudiag launch: all OK | exit | mpirun: all OK | exit | launch / mpirun |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in a.ranks.split(",")):
        launch, mpirun = [], []
        for _ in range(a.repeat):  # alternate so drift hits both alike
            launch.append(timed([BIN, "launch", "--nproc-per-node", str(n), "--", *CHECK], n, base))
            mpirun.append(timed(["mpirun", "-np", str(n), "--oversubscribe", BIN, *CHECK], n, mpi_env))
        bad_l = sum(1 for x in launch if x[2] != 0)
        bad_m = sum(1 for x in mpirun if x[2] != 0)
        l_ok = statistics.median(x[0] for x in launch)
        l_exit = statistics.median(x[1] for x in launch)
        m_ok = statistics.median(x[0] for x in mpirun)
        m_exit = statistics.median(x[1] for x in mpirun)
        note = "".join(f" ({k} of {a.repeat} {who} runs all OK but exit non-zero)"
                       for k, who in ((bad_l, "launch"), (bad_m, "mpirun")) if k)
        print(f"| {n} | {l_ok:.2f} s | {l_exit:.2f} s | {m_ok:.2f} s | {m_exit:.2f} s | {l_ok / m_ok:.2f}x{note} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
