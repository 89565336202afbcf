"""Numbers and resources from the command line and the environment: every
bad value gets one line and its exit status, never a crash, a false verdict
or a report silently not written."""
import os
import unittest

from harness import BIN, free_port, rank_env, run


def one_line_error(test, r, status, *parts):
    test.assertEqual(r.returncode, status, r.stdout + r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.startswith("gpudiag")]
    test.assertEqual(len(lines), 1, r.stderr)
    for p in parts:
        test.assertIn(p, lines[0])
    test.assertNotIn("internal error", r.stderr)


class FloatingOptions(unittest.TestCase):
    def test_nan_and_inf_are_refused_everywhere(self):
        for args in (["check", "--timeout", "nan"], ["check", "--timeout", "inf"],
                     ["bench", "--timeout", "nan"], ["launch", "--grace", "nan", "--", "check"],
                     ["launch", "--grace", "inf", "--", "check"],
                     ["launch", "--kill-after", "-inf", "--", "check"],
                     ["launch", "--timeout", "nan", "--", "check"]):
            with self.subTest(args=args):
                r = run([BIN, *args], timeout=30)
                one_line_error(self, r, 2, "must be a number of seconds", args[1] + ":")

    def test_nan_in_a_fraction_or_a_factor_is_refused(self):
        # CLI11's Range lets NaN through (every comparison with it is false).
        for args, named in ((["scan", "--near-limit", "nan", "/tmp"], "--near-limit:"),
                            (["bench", "-f", "nan"], "--stepfactor:"),
                            (["bench", "-f", "inf"], "--stepfactor:")):
            with self.subTest(args=args):
                r = run([BIN, *args], timeout=30)
                one_line_error(self, r, 2, named, "must be a number of")

    def test_a_timeout_past_what_the_code_represents_is_refused(self):
        r = run([BIN, "launch", "--timeout", "1e10", "--", "check"], timeout=30)
        one_line_error(self, r, 2, "--timeout", "1e10")


class Resources(unittest.TestCase):
    def test_more_memory_than_the_host_has_is_a_broken_line(self):
        r = run([BIN, "check", "--backend", "host", "--mem", "1TiB"], timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"is broken: --mem 1 TiB is more than the .* available")
        self.assertNotIn("internal error", r.stderr)

    def test_a_world_too_large_is_a_usage_error_before_any_allocation(self):
        env = rank_env(0, 10_000_000, free_port())
        r = run([BIN, "check", "--backend", "host"], env=env, timeout=60)
        one_line_error(self, r, 2, "WORLD_SIZE=10000000 is more ranks than gpudiag supports")


class OutputFiles(unittest.TestCase):
    def test_json_to_a_full_disk_or_a_missing_folder_is_an_error(self):
        # A full disk is only seen when the report is written (after the job);
        # a missing folder before the job starts (cli/json_output.h).
        for path, why in (("/dev/full", "cannot write it: No space left on device"),
                          ("/nonexistent/dir/report.json", "the folder /nonexistent/dir does not exist")):
            for cmd in (["check"], ["bench", "--max", "8KiB", "--min", "4KiB"]):
                with self.subTest(path=path, cmd=cmd[0]):
                    r = run([BIN, *cmd, "--backend", "host", "--json", path], timeout=60)
                    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                    self.assertIn(f"--json {path}", r.stderr)
                    self.assertIn(why, r.stderr)


if __name__ == "__main__":
    unittest.main()
