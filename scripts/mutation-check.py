#!/usr/bin/env python3
"""Mutation check: plants known one-line bugs, one at a time, rebuilds, runs
the tests written to catch each, restores the file, and prints "caught" or
"MISSED" per test. A test that still passes with its bug planted cannot fail
for the user's reason and must be made to bite.

    scripts/mutation-check.py [N ...]      (default: every mutation; build/ must be configured)

Each entry: a name, a file, the text replaced, its planted form, and the
tests ("gtest:FILTER" or "py:module.Class.test" under tests/integration)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(ROOT, "build"))
ENV = dict(os.environ, GPUDIAG_BUILD_DIR=BUILD)
M = [
 ("1 slow fractions swapped", "src/sweep/planner.cpp", "gpu ? 0.5 : 0.25", "gpu ? 0.25 : 0.5",
  ["gtest:SweepPlanner.EachBackendsSlowThresholdAtItsBoundary"]),
 ("2 pair min for max", "src/sweep/planner.cpp", "it->second.gbps = std::max(it->second.gbps, p.gbps);",
  "it->second.gbps = std::min(it->second.gbps, p.gbps);", ["gtest:SweepPlanner.APairsFasterEndIsBelieved"]),
 ("3 rank 0 dropped from digest missing", "src/plane/checkpoint_digest.cpp", "if (r >= 0 && r < size && r != self",
  "if (r > 0 && r < size && r != self", ["gtest:CheckpointDigest.*",
  "py:test_tree_nodes.LaunchLeadsOnNamespaceNodes.test_a_rank_zero_that_never_arrives_is_named_by_every_other_rank"]),
 ("4 compare_set no wake", "src/store/server_torch.cpp",
  "        answer = *state_.find(k);\n      }\n      reply(c, vec(answer));\n      wake(woken);",
  "        answer = *state_.find(k);\n      }\n      reply(c, vec(answer));", [
  "py:test_launch_torch.TrainingScriptUnderLaunch.test_compare_set_wakes_a_wait_parked_on_its_key"]),
 ("5 error file by global rank", "src/launch/entry.cpp",
  'job.error_dir + "/" + std::to_string(local_rank) + "/error.json"',
  'job.error_dir + "/" + std::to_string(job.rank_of(local_rank)) + "/error.json"',
  ["gtest:RankEnvironment.TorchErrorFileIsNamedByLocalRankOnEveryNode", "py:test_launch_torch.ErrorAcrossNodes.test_a_rank_of_the_second_node_is_named_with_its_exception"]),
 ("7 a rank gone while its stack was taken said to refuse ptrace", "src/launch/supervisor_hang.cpp",
  "    if (s.status) {  // it ended while its stack was taken",
  "    if (false) {  // it ended while its stack was taken",
  ["py:test_launch_stacks_race.RankDiesWhileStacksAreTaken.test_the_rank_that_died_is_the_root_cause"]),
 ("8 a rank's state a slot per rank again", "src/checks/peer_book.cpp",
  "  forget_present(res.missed_at, missing);\n",
  "  for (int r = 0; r < n; ++r) res.last_seen[r];\n",
  ["gtest:PeerBook.*", "py:test_scale_sim.ScaleSim.test_bytes_per_rank_and_per_node_do_not_grow_with_the_job"]),
 ("9 a rank failing in a hung job's stop counts as its failure", "src/launch/job_status.cpp",
  "return stop.deadline && r.stopped_by_launcher;", "return false && r.stopped_by_launcher;",
  ["gtest:JobExitStatus.TheLaunchersOwnDeadlinesGiveThree"]),
 ("6 percentile off by one", "src/report/nccl_tests_json.cpp", "(n * p + 99) / 100 - 1", "(n * p + 99) / 100",
  ["gtest:NcclTestsJson.PercentilesAreNcclTestsNearestRankAtTwentyIterations"]),
]
only = sys.argv[1:]
for name, path, old, new, tests in M:
    if only and name.split()[0] not in only:
        continue
    p = os.path.join(ROOT, path)
    orig = open(p).read()
    assert orig.count(old) == 1, (name, orig.count(old))
    open(p, "w").write(orig.replace(old, new))
    try:
        b = subprocess.run(["cmake", "--build", BUILD, "-j2"], cwd=ROOT, env=ENV, capture_output=True, text=True)
        if b.returncode:
            print(name, "BUILD FAILED", b.stdout[-2000:])
            continue
        for t in tests:
            kind, what = t.split(":", 1)
            if kind == "gtest":
                r = subprocess.run([os.path.join(BUILD, "gpudiag_tests"), "--gtest_filter=" + what, "--gtest_brief=1"],
                                   capture_output=True, text=True, timeout=600)
            else:
                r = subprocess.run([sys.executable, "-m", "unittest", what], cwd=os.path.join(ROOT, "tests", "integration"),
                                   env=ENV, capture_output=True, text=True, timeout=900)
            print(f"{name}: {t}: {'caught' if r.returncode else 'MISSED'}", flush=True)
    finally:
        open(p, "w").write(orig)
subprocess.run(["cmake", "--build", BUILD, "-j2"], cwd=ROOT, env=ENV, capture_output=True)
