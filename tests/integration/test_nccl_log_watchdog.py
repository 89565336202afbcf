"""End-to-end tests of `gpudiag nccl-log` on PyTorch's ProcessGroupNCCL watchdog lines.

A 4-rank job whose watchdog fired on ranks 0, 1 and 3 while rank 2 was one collective behind
(by the sequence numbers torch itself logged) must be a problem that names rank 2; a healthy
job whose log carries the same words in INFO lines (the timeout setting, "watchdog", busy and
skewed sequence numbers in two process groups) must be clean. The logs are constructed in
torch 2.5's format (tests/fixtures/nccl_logs/SOURCES.md); every other version's lines are in
src/nccl_log/side_line_test.cpp and watchdog_rules_test.cpp.
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("GPUDIAG_BIN", "build/gpudiag")
SRC = os.environ.get("GPUDIAG_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
FIX = os.path.join(SRC, "tests", "fixtures", "nccl_logs", "constructed", "torch_watchdog")


def run(*args):
    return subprocess.run([BIN, "nccl-log", *args], capture_output=True, text=True, timeout=60)


def findings(rep, fid):
    return [f for f in rep["findings"] if f["id"] == fid]


class WatchdogTimeout(unittest.TestCase):
    def test_the_rank_behind_is_named_and_the_exit_status_says_problem(self):
        r = run("--json", "-", os.path.join(FIX, "rank2_behind.log"))
        self.assertEqual(r.returncode, 1, r.stderr)
        rep = json.loads(r.stdout)
        fs = findings(rep, "torch-watchdog-timeout")
        self.assertEqual(len(fs), 1, [f["id"] for f in rep["findings"]])
        f = fs[0]
        self.assertEqual(f["severity"], "problem")
        self.assertEqual(f["blamed"], ["rank 2"])
        self.assertEqual(f["waiting"], ["rank 0", "rank 1", "rank 3"])
        self.assertEqual(f["unknown"], [])
        self.assertIn("collective 42 (BROADCAST)", f["title"])
        self.assertIn("rank 2 is behind: last enqueued collective 41", f["title"])
        self.assertIn("[rank2]:", f["evidence"][1]["text"])
        self.assertIn("py-spy", f["remedy"])
        self.assertTrue(rep["problems"])
        self.assertEqual(rep["exit_code"], 1)
        self.assertEqual(rep["torch_lines"], 17)  # the 4 initialization-options lines are not

    def test_text_report_says_whom_it_blames_apart_from_who_waited(self):
        r = run(os.path.join(FIX, "rank2_behind.log"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("No problems found", r.stdout)
        self.assertIn("PROBLEM [torch-watchdog-timeout]", r.stdout)
        self.assertIn("  blamed:  rank 2\n", r.stdout)
        self.assertIn("  waiting: rank 0, rank 1, rank 3\n", r.stdout)

    def test_a_log_without_nccl_lines_is_read_for_its_watchdog_lines(self):
        # The job ran without NCCL_DEBUG: only PyTorch's own lines are there.
        with open(os.path.join(FIX, "rank2_behind.log")) as f:
            kept = [line for line in f if " NCCL INFO " not in line]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "job.out")
            with open(path, "w") as f:
                f.writelines(kept)
            r = run("--json", "-", d)  # inside a directory too: not skipped as "no NCCL line"
        self.assertEqual(r.returncode, 1, r.stderr)
        rep = json.loads(r.stdout)
        self.assertEqual(rep["nccl_lines"], 0)
        self.assertEqual(rep["skipped_files"], [])
        self.assertEqual(findings(rep, "torch-watchdog-timeout")[0]["blamed"], ["rank 2"])

    def test_healthy_job_with_the_same_words_is_clean(self):
        r = run(os.path.join(FIX, "healthy.log"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("No problems found", r.stdout)
        r = run("--json", "-", os.path.join(FIX, "healthy.log"))
        rep = json.loads(r.stdout)
        self.assertEqual(rep["findings"], [])
        self.assertGreater(rep["torch_lines"], 200)


if __name__ == "__main__":
    unittest.main()
