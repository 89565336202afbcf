#!/usr/bin/env python3
"""Mutation check: plants known one-line bugs, one at a time, rebuilds, runs
the tests written to catch each, restores the file, and says per test
"caught" or "MISSED". A test that still passes with its bug planted cannot
fail for the user's reason and must be made to bite.

    scripts/mutation-check.py [N ...]      (default: every mutant; the build folder must be configured)
    scripts/mutation-check.py --find [N ...]   (only where each would be planted; nothing built or changed)

It plants bugs into the source tree it sits in: run it in a tree of its own
(git worktree add /tmp/mut-tree HEAD; cmake -S /tmp/mut-tree -B /tmp/mut-build),
never in one that others build and test in. Environment:
  GPUDIAG_BUILD_DIR    the build folder (default: build/ beside this script's tree)
  GPUDIAG_BUILD_LOCK   a lock file: each build runs under `flock` on it

Each mutant names a file, the code it changes as a pattern (`code()`: the
tokens in order, any spacing or line breaks between them; or a regular
expression), the planted form, and its tests ("gtest:FILTER", or
"py:module.Class.test" under tests/integration), the fast unit tests where one
catches the bug. A pattern that matches no place or more than one is "not
planted" and the run goes on. Before planting, each test is run once on the
tree as it is: one that fails there cannot judge a mutant. A mutant is caught
when every one of its tests fails with it planted. The last line:
"N caught, M missed, K not planted"."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(ROOT, "build"))
LOCK = os.environ.get("GPUDIAG_BUILD_LOCK", "")
ENV = dict(os.environ, GPUDIAG_BUILD_DIR=BUILD, GPUDIAG_SOURCE_DIR=ROOT,
           GPUDIAG_BIN=os.path.join(BUILD, "gpudiag"))
TARGETS = ["gpudiag", "gpudiag_tests"]


def code(text):
    """A pattern for `text` as code: its tokens in order, any whitespace between."""
    tokens = re.findall(r"\w+|\S", text)
    return r"\s*".join(re.escape(t) for t in tokens)


M = [
 ("1 slow fractions swapped", "src/sweep/planner.cpp",
  code("gpu ? 0.5 : 0.25"), "gpu ? 0.25 : 0.5",
  ["gtest:SweepPlanner.EachBackendsSlowThresholdAtItsBoundary"]),
 ("2 pair min for max", "src/sweep/planner.cpp",
  code("it->second.gbps = std::max(it->second.gbps, p.gbps);"),
  "it->second.gbps = std::min(it->second.gbps, p.gbps);",
  ["gtest:SweepPlanner.APairsFasterEndIsBelieved"]),
 ("3 rank 0 dropped from digest missing", "src/plane/checkpoint_digest.cpp",
  code("if (r != self) out.push_back("), "if (r > 0 && r != self) out.push_back(",
  ["gtest:CheckpointDigest.*"]),
 ("4 compare_set no wake", "src/store/server_torch.cpp",
  # COMPARE_SET's reply, then the wake of the waits its set answered.
  code("reply(c, vec(answer));") + r"\s*" + code("wake(woken);"), "reply(c, vec(answer));",
  ["gtest:TorchSide.CompareSetWakesAWaitParkedOnAnotherConnection"]),
 ("5 error file by global rank", "src/launch/entry.cpp",
  code('job.error_dir + "/" + std::to_string(local_rank) + "/error.json"'),
  'job.error_dir + "/" + std::to_string(job.rank_of(local_rank)) + "/error.json"',
  ["gtest:RankEnvironment.TorchErrorFileIsNamedByLocalRankOnEveryNode"]),
 ("6 percentile off by one", "src/report/nccl_tests_json.cpp",
  code("(n * p + 99) / 100 - 1"), "(n * p + 99) / 100",
  ["gtest:NcclTestsJson.PercentilesAreNcclTestsNearestRankAtTwentyIterations"]),
 ("7 a rank gone while its stack was taken said to refuse ptrace", "src/launch/supervisor_hang.cpp",
  code("if (s.status) {") + r"(?=\s*//\s*it ended while its stack was taken)", "if (false) {",
  ["py:test_launch_stacks_race.RankDiesWhileStacksAreTaken.test_the_rank_that_died_is_the_root_cause"]),
 ("8 a rank's state a slot per rank again", "src/checks/peer_book.cpp",
  code("forget_present(res.missed_at, missing);"),
  "forget_present(res.missed_at, missing);\n  for (int r = 0; r < n; ++r) res.last_seen[r];",
  ["gtest:PeerBook.ARankOfAHundredThousandHoldsWhatItRead"]),
 ("9 a rank failing in a hung job's stop counts as its failure", "src/launch/job_status.cpp",
  code("return stop.deadline && r.stopped_by_launcher;"), "return false && r.stopped_by_launcher;",
  ["gtest:JobExitStatus.TheLaunchersOwnDeadlinesGiveThree"]),
 ("10 uneven hosts judged by the most GPUs a host", "src/report/expected_bw_job.cpp",
  code("m.gpus_per_node = m.gpus_per_node == 0 ? n : std::min(m.gpus_per_node, n);"),
  "m.gpus_per_node = m.gpus_per_node == 0 ? n : std::max(m.gpus_per_node, n);",
  ["gtest:ExpectedBwJob.AcrossNodesCountsTheNicsTheJobsGpusCanUse"]),
 ("11 native stacks first taken at the limit, not half of it", "src/launch/progress_watch.cpp",
  # The first stack of a silent stretch: taken once the silence reaches half the limit.
  r"(!\s*half_taken_\s*&&\s*idle\s*>=\s*limit_s_)\s*/\s*2\b", r"\1",
  # (test_launch_stacks_race.SilentNativeRankThatMoves caught it too, but a job whose ranks
  # wait for no peer is not stopped whatever the watch says, so the unit test judges it.)
  ["gtest:ProgressWatch.ANativeRankThatMovedSinceHalfTheLimitIsNotHung"]),
 ("12 a frame without a time sorts first", "src/numerics/detector/rank_scan.cpp",
  code("std::isnan(r.result.first->time) ? INFINITY :"), "std::isnan(r.result.first->time) ? -INFINITY :",
  ["gtest:RankScan.AFrameWithoutATimeComesAfterOneWithATime"]),
 ("13 of two ranks, the one not waiting is not named", "src/launch/stacks.cpp",
  code("g.ranks.size() * 2 <= stacks.size()"), "g.ranks.size() * 2 < stacks.size()",
  ["gtest:Stacks.OfTwoRanksTheOneNotWaitingIsWaitedFor"]),
 ("14 gated batches not aligned", "src/comm/nccl_comm.cpp",
  code("if (gate) launch(c, deadline);"), "",
  ["gtest:Ranks/NcclMeter.SkewedPeersAreOutside*"]),
 ("15 the abort leaves the gate held", "src/comm/nccl_comm.cpp",
  code("if (held_) ctx_.cuda->gate_open(held_);"), "",
  ["gtest:Ranks/NcclMeter.AnAbortMidBatchOpensTheGateFirst*"]),
 ("16 a threaded launch's ncclSuccess read as inline", "src/comm/nccl_enqueue.cpp",
  code("return (size == 1 && !p2p) || (version > 0 && version < 22300);"), "return true;",
  ["gtest:Ranks/NcclMeter.ALaunchEndedBeforeTheCallReturnedKeepsTheGateHeld*"]),
]


def build():
    cmd = ["cmake", "--build", BUILD, "-j2", "--target", *TARGETS]
    if LOCK:
        cmd = ["flock", LOCK, *cmd]
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)


def fails(test):
    """(failed, why): runs one test target; a target that ran nothing did not fail."""
    kind, what = test.split(":", 1)
    try:
        if kind == "gtest":
            r = subprocess.run([os.path.join(BUILD, "gpudiag_tests"), "--gtest_filter=" + what, "--gtest_brief=1"],
                               capture_output=True, text=True, timeout=600)
            if r.returncode == 0 and re.search(r"\b0 tests? from", r.stdout):
                return False, "no such test"
        else:
            r = subprocess.run([sys.executable, "-m", "unittest", what], cwd=os.path.join(ROOT, "tests", "integration"),
                               env=ENV, capture_output=True, text=True, timeout=900)
            if r.returncode == 0 and "skipped" in r.stderr:
                return False, "skipped: " + r.stderr.strip().splitlines()[-1]
    except subprocess.TimeoutExpired:
        return True, "timed out"
    return r.returncode != 0, (r.stdout + r.stderr)[-1500:] if r.returncode else ""


def place(path, pattern):
    """(match, None), or (None, why the mutant cannot be planted)."""
    try:
        text = open(os.path.join(ROOT, path)).read()
    except OSError as e:
        return None, f"{path}: {e.strerror}"
    found = list(re.finditer(pattern, text))
    if len(found) != 1:
        return None, f"{path}: the code it changes is found {len(found)} times, not once"
    return found[0], None


def main():
    args = sys.argv[1:]
    find_only = "--find" in args
    only = [a for a in args if a != "--find"]
    chosen = [m for m in M if not only or m[0].split()[0] in only]
    if find_only:
        for name, path, pattern, planted, _ in chosen:
            m, why = place(path, pattern)
            line = m.string.count("\n", 0, m.start()) + 1 if m else 0
            print(f"{name}: " + (f"{path}:{line}: {m.group(0)!r} -> {m.expand(planted)!r}" if m
                                 else f"NOT PLANTED ({why})"))
        return
    b = build()
    if b.returncode:
        sys.exit("the tree as it is does not build:\n" + (b.stdout + b.stderr)[-3000:])
    broken = {}
    for t in sorted({t for m in chosen for t in m[4]}):
        failed, why = fails(t)
        if failed:
            broken[t] = why
            print(f"{t} fails with no bug planted; it judges nothing:\n{why}", flush=True)
    caught, missed, unplanted = [], [], []
    for name, path, pattern, planted, tests in chosen:
        m, why = place(path, pattern)
        if not m:
            print(f"{name}: NOT PLANTED ({why})", flush=True)
            unplanted.append(name)
            continue
        p, orig = os.path.join(ROOT, path), m.string
        open(p, "w").write(orig[:m.start()] + m.expand(planted) + orig[m.end():])
        try:
            b = build()
            if b.returncode:
                print(f"{name}: NOT PLANTED (it does not build)\n{(b.stdout + b.stderr)[-2000:]}", flush=True)
                unplanted.append(name)
                continue
            all_caught = True
            for t in tests:
                if t in broken:
                    print(f"{name}: {t}: not judged (fails without the bug)", flush=True)
                    all_caught = False
                    continue
                failed, why = fails(t)
                all_caught = all_caught and failed
                said = "caught" if failed else "MISSED"
                print(f"{name}: {t}: {said}" + (f" ({why})" if why and not failed else ""), flush=True)
            (caught if all_caught else missed).append(name)
        finally:
            open(p, "w").write(orig)
    build()
    print(f"{len(caught)} caught, {len(missed)} missed, {len(unplanted)} not planted", flush=True)
    sys.exit(1 if missed or unplanted or broken else 0)


if __name__ == "__main__":
    main()
