"""gpudiag launch's Python startup file records a rank's uncaught exception in
its error file (TORCHELASTIC_ERROR_FILE) in torch's @record format, so the
launcher names the exception with or without @record: the main thread's and a
thread's; not a Python process the rank starts; a file @record wrote first is
kept; the hooks installed before still run after it (the interpreter's prints
the traceback, a user's sitecustomize's runs), and a hook the script installs
itself handles its exception alone. Plain Python scripts and real torch
(Debian's 1.13, DDP over gloo); every order comes from a process's exit."""
import json
import os
import re
import shutil
import tempfile
import unittest

from harness import BIN, TORCH_PYTHON, clean_env, have_torch, run, launch_torch_python, write_scripts

TRAIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch",
                                     "train.py"))

SCRIPTS = {
    "raises.py": 'import os\n'
                 'def main():\n'
                 '    raise ValueError("bad batch on rank %s" % os.environ["RANK"])\n'
                 'main()\n',
    # A thread of the rank raises; the main thread then exits 7.
    "thread.py": 'import os, sys, threading\n'
                 'def load():\n'
                 '    raise ValueError("loader broke on rank %s" % os.environ["RANK"])\n'
                 't = threading.Thread(target=load, name="loader")\n'
                 't.start()\n'
                 't.join()\n'
                 'sys.exit(7)\n',
    # A Python process the rank starts raises; the rank itself exits 1.
    "helper.py": 'import subprocess, sys\n'
                 'subprocess.run([sys.executable, "-c", "raise ValueError(\'a helper failed\')"])\n'
                 'sys.exit(1)\n',
    # The script's own hook handles the exception.
    "own_hook.py": 'import sys\n'
                   'sys.excepthook = lambda t, v, tb: print("handled by the script:", t.__name__)\n'
                   'raise ValueError("own")\n',
}

# A user's sitecustomize that installs its own hook before the launcher's.
USER_SITE = ('import sys\n'
             '_before = sys.excepthook\n'
             'def _hook(t, v, tb):\n'
             '    sys.stderr.write("the user hook saw %s\\n" % t.__name__)\n'
             '    _before(t, v, tb)\n'
             'sys.excepthook = _hook\n')


launch = launch_torch_python


def error_file(err):
    m = re.search(r"traceback: (\S+/error\.json)", err)
    if not m:
        return None
    with open(m.group(1)) as f:
        return json.load(f)


class PlainScripts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = write_scripts("gpudiag-error-hook-", SCRIPTS)
        os.makedirs(os.path.join(cls.dir, "site"))
        with open(os.path.join(cls.dir, "site", "sitecustomize.py"), "w") as f:
            f.write(USER_SITE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def script(self, name):
        return os.path.join(self.dir, name)

    def test_an_exception_without_record_is_named(self):
        p = launch("--nproc-per-node", "2", "--grace", "0", self.script("raises.py"))
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertRegex(p.stderr, r"gpudiag launch: root cause: rank \d \[[^\]]+\] raised "
                                   r"ValueError: bad batch on rank \d\n  at File \"[^\"]+raises\.py\", "
                                   r"line 3, in main\n")
        self.assertNotIn("wrote no error file", p.stderr)
        e = error_file(p.stderr)
        self.assertRegex(e["message"]["message"], r"^ValueError: bad batch on rank \d$")
        self.assertIn('raises.py", line 3, in main', e["message"]["extraInfo"]["py_callstack"])
        self.assertRegex(e["message"]["extraInfo"]["timestamp"], r"^\d+$")
        # The interpreter's own hook still printed the traceback.
        self.assertRegex(p.stderr, r"\[rank\d\]: Traceback \(most recent call last\):")

    def test_an_exception_in_a_thread_is_named(self):
        p = launch("--nproc-per-node", "1", self.script("thread.py"))
        self.assertEqual(p.returncode, 7, p.stderr[-3000:])
        self.assertIn("root cause: rank 0 [", p.stderr)
        self.assertIn("raised ValueError: loader broke on rank 0\n  at File \"", p.stderr)
        self.assertIn('thread.py", line 3, in load', p.stderr)
        self.assertIn("Exception in thread loader", p.stderr)  # threading's own hook still ran

    def test_a_process_the_rank_starts_is_not_the_rank(self):
        p = launch("--nproc-per-node", "1", self.script("helper.py"))
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertIn("ValueError: a helper failed", p.stderr)  # printed by the helper
        self.assertIn("exited with status 1 without raising an exception", p.stderr)
        self.assertNotIn("raised ValueError", p.stderr)

    def test_hooks_installed_before_still_run_and_the_scripts_own_wins(self):
        p = launch("--nproc-per-node", "1", self.script("raises.py"),
                   extra_env={"PYTHONPATH": os.path.join(self.dir, "site")})
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertIn("the user hook saw ValueError", p.stderr)
        self.assertIn("Traceback (most recent call last)", p.stderr)
        self.assertIn("raised ValueError: bad batch on rank 0", p.stderr)
        # A hook the script installs itself handles the exception alone.
        p = launch("--nproc-per-node", "1", self.script("own_hook.py"))
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertIn("handled by the script: ValueError", p.stdout)
        self.assertNotIn("Traceback", p.stderr)


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class WithRecord(unittest.TestCase):
    def test_the_file_record_wrote_is_kept(self):
        p = launch("--nproc-per-node", "2", TRAIN, "--steps", "6", "--fail-rank", "1",
                   "--fail-step", "2")
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertIn("raised ValueError: step 2 went wrong on rank 1", p.stderr)
        # @record's traceback starts in its wrapper; the startup file's would
        # start at the script's <module> frame.
        stack = error_file(p.stderr)["message"]["extraInfo"]["py_callstack"]
        self.assertIn("in wrapper", stack)
        self.assertNotIn("in <module>", stack)


if __name__ == "__main__":
    unittest.main()
