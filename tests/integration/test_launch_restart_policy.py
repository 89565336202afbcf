"""gpudiag launch's restart policy under --max-restarts: a rank that raises the
same exception at the same line in two attempts in a row is a workload error,
and the launcher stops restarting it (after 2 attempts, not N + 1); a fault
that does not repeat (another message, another line, a kill, an attempt that
then succeeds) is restarted as before; --restart-policy always restarts every
failure. The exception is known from the rank's error file, written by torch's
@record or, without it, by the launcher's Python startup file
(test_launch_error_hook). Real torch (Debian's 1.13, DDP over gloo) and plain Python scripts;
every order here comes from a process's exit, none from a sleep."""
import json
import os
import re
import shutil
import tempfile
import unittest

from harness import BIN, TORCH_PYTHON, clean_env, have_torch, run, launch_torch_python, write_scripts

TRAIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch",
                                     "train.py"))
REPEATED = re.compile(r"gpudiag launch: the same error repeated in attempts (\d+) and (\d+) "
                      r"\(rank (\d+) raised (.*) at (\S+)\): a workload error; not restarting "
                      r"\(--restart-policy always would\)\n")

SCRIPTS = {
    # Rank 1 raises the same ValueError at the same line in every attempt.
    "same.py": 'import os\n'
               'if os.environ["RANK"] == "1":\n'
               '    raise ValueError("bad batch on rank 1")\n',
    # The message differs in each attempt.
    "counter.py": 'import os\n'
                  'raise ValueError("attempt %s" % os.environ["TORCHELASTIC_RESTART_COUNT"])\n',
    # The same message, from another line in attempt 0.
    "lines.py": 'import os\n'
                'if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":\n'
                '    raise ValueError("bad")\n'
                'raise ValueError("bad")\n',
    # A thread of the rank raises; the main thread then exits 7.
    "thread.py": 'import os, sys, threading\n'
                 'def load():\n'
                 '    raise ValueError("loader broke on rank %s" % os.environ["RANK"])\n'
                 't = threading.Thread(target=load, name="loader")\n'
                 't.start()\n'
                 't.join()\n'
                 'sys.exit(7)\n',
    # A rank that exits 1 without an exception in every attempt.
    "exits.py": 'import sys\n'
                'sys.exit(1)\n',
    # Rank 1 kills itself in every attempt: no exception, nothing repeats.
    "killed.py": 'import os, signal\n'
                 'if os.environ["RANK"] == "1":\n'
                 '    os.kill(os.getpid(), signal.SIGKILL)\n',
}


launch = launch_torch_python


def restarts(err):
    return len(re.findall(r"gpudiag launch: restarting the whole local group", err))


def error_file(err, attempt):
    paths = re.findall(r"traceback: (\S+/attempt_%d/\d+/error\.json)" % attempt, err)
    if not paths:
        return None
    with open(paths[-1]) as f:
        return json.load(f)


class PlainScripts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = write_scripts("gpudiag-restart-", SCRIPTS)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def script(self, name):
        return os.path.join(self.dir, name)

    def test_the_same_error_twice_stops_after_two_attempts(self):
        with tempfile.NamedTemporaryFile(suffix=".json") as js:
            p = launch("--nproc-per-node", "2", "--max-restarts", "3", "--grace", "0",
                       "--json", js.name, self.script("same.py"))
            with open(js.name) as f:
                doc = json.load(f)
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        m = REPEATED.search(p.stderr)
        self.assertIsNotNone(m, p.stderr[-3000:])
        self.assertEqual(m.groups(), ("0", "1", "1", "ValueError: bad batch on rank 1", "same.py:3"))
        self.assertEqual(restarts(p.stderr), 1, p.stderr[-3000:])
        self.assertNotIn("attempt_2", p.stderr)
        # The decision in --json: one restart, then stopped.
        self.assertEqual(doc["restart_policy"], "on-new-error")
        self.assertEqual([a["then"] for a in doc["attempts"]], ["restart", "repeated_error"])
        self.assertEqual(doc["attempts"][1]["error"]["rank"], 1)
        self.assertEqual(doc["attempts"][1]["error"]["line"], 3)
        self.assertEqual(doc["restarts_stopped"] + "\n", m.group(0)[len("gpudiag launch: "):])
        # Recorded without @record, in torch's format; the default hook still printed it.
        e = error_file(p.stderr, 1)
        self.assertEqual(e["message"]["message"], "ValueError: bad batch on rank 1")
        self.assertIn('same.py", line 3, in <module>', e["message"]["extraInfo"]["py_callstack"])
        self.assertRegex(e["message"]["extraInfo"]["timestamp"], r"^\d+$")
        self.assertIn("[rank1]: Traceback (most recent call last):", p.stderr)
        self.assertIn("root cause: rank 1 [", p.stderr)

    def test_restart_policy_always_restarts_as_before(self):
        p = launch("--nproc-per-node", "2", "--max-restarts", "3", "--grace", "0",
                   "--restart-policy", "always", self.script("same.py"))
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertEqual(restarts(p.stderr), 3, p.stderr[-3000:])
        self.assertIn("(restart 3 of 3, --max-restarts)", p.stderr)
        self.assertNotIn("the same error repeated", p.stderr)

    def test_an_error_that_changes_is_restarted(self):
        # Another message in every attempt: all 4 attempts, as before.
        p = launch("--nproc-per-node", "1", "--max-restarts", "3", self.script("counter.py"))
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertEqual(restarts(p.stderr), 3, p.stderr[-3000:])
        self.assertNotIn("the same error repeated", p.stderr)
        # The same message from another line in attempt 0: attempt 1 is not a
        # repeat of it; attempt 2 is the last allowed anyway.
        p = launch("--nproc-per-node", "1", "--max-restarts", "2", self.script("lines.py"))
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertEqual(restarts(p.stderr), 2, p.stderr[-3000:])
        self.assertNotIn("the same error repeated", p.stderr)

    def test_a_rank_killed_or_exiting_without_an_exception_is_restarted(self):
        p = launch("--nproc-per-node", "2", "--max-restarts", "2", "--grace", "0",
                   self.script("killed.py"))
        self.assertEqual(p.returncode, 128 + 9, p.stderr[-3000:])
        self.assertEqual(restarts(p.stderr), 2, p.stderr[-3000:])
        self.assertNotIn("the same error repeated", p.stderr)
        p = launch("--nproc-per-node", "1", "--max-restarts", "2", self.script("exits.py"))
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertIn("exited with status 1 without raising an exception", p.stderr)
        self.assertEqual(restarts(p.stderr), 2, p.stderr[-3000:])
        self.assertNotIn("the same error repeated", p.stderr)

    def test_an_exception_in_a_thread_is_recorded_and_repeats(self):
        for code, extra in ((7, []), (1, ["--exit-code", "torchrun"])):
            p = launch("--nproc-per-node", "1", "--max-restarts", "3", *extra,
                       self.script("thread.py"))
            self.assertEqual(p.returncode, code, p.stderr[-3000:])
            self.assertIn("root cause: rank 0 [", p.stderr)
            self.assertIn("raised ValueError: loader broke on rank 0\n  at File \"", p.stderr)
            self.assertIn("Exception in thread loader", p.stderr)  # threading's own hook still ran
            m = REPEATED.search(p.stderr)
            self.assertIsNotNone(m, p.stderr[-3000:])
            self.assertEqual(m.group(5), "thread.py:3")
            self.assertEqual(restarts(p.stderr), 1)


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class TrainingUnderRestarts(unittest.TestCase):
    def test_a_repeated_workload_error_stops_after_two_attempts(self):
        p = launch("--nproc-per-node", "2", "--max-restarts", "3", TRAIN, "--steps", "6",
                   "--fail-rank", "1", "--fail-step", "2")
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        m = REPEATED.search(p.stderr)
        self.assertIsNotNone(m, p.stderr[-3000:])
        self.assertEqual(m.group(1, 2, 3, 4), ("0", "1", "1", "ValueError: step 2 went wrong on rank 1"))
        self.assertRegex(m.group(5), r"^train\.py:\d+$")
        self.assertEqual(restarts(p.stderr), 1, p.stderr[-3000:])
        # @record wrote the file first (its traceback starts in its wrapper);
        # the startup file's hook left it as it was.
        for attempt in (0, 1):
            e = error_file(p.stderr, attempt)
            self.assertIsNotNone(e, p.stderr[-3000:])
            stack = e["message"]["extraInfo"]["py_callstack"]
            self.assertIn("in wrapper", stack)
            self.assertNotIn("in <module>", stack)

    def test_a_fault_that_goes_away_is_restarted_and_completes(self):
        p = launch("--nproc-per-node", "2", "--max-restarts", "3", TRAIN, "--steps", "4",
                   "--fail-rank", "1", "--fail-step", "1", "--fail-attempts", "1")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(restarts(p.stderr), 1, p.stderr[-3000:])
        self.assertNotIn("the same error repeated", p.stderr)
        self.assertEqual(len(re.findall(r"step 3 loss", p.stdout)), 1, p.stdout)

    def test_a_healthy_job_never_sees_the_policy(self):
        p = launch("--nproc-per-node", "2", "--max-restarts", "3", TRAIN, "--steps", "3")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(restarts(p.stderr), 0, p.stderr[-3000:])
        self.assertNotIn("the same error repeated", p.stderr)
        self.assertNotIn("root cause", p.stderr)


if __name__ == "__main__":
    unittest.main()
