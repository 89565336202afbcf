"""gpudiag launch's root cause names the user's line: a rank whose exception
is raised inside the standard library (`<frozen os>`) is said to be `at` the
user's frame that called it, and the traceback file keeps the whole stack."""
import json
import os
import re
import unittest

from harness import BIN, TORCH_PYTHON, clean_env, have_torch, run

FIXTURE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch",
                                       "raise_in_stdlib.py"))


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class AtLine(unittest.TestCase):
    def test_an_exception_raised_in_the_standard_library_names_the_users_line(self):
        env = clean_env()
        env["PYTHON_EXEC"] = TORCH_PYTHON
        env.pop("GPUDIAG_VARIABLE_NOBODY_SETS", None)
        p = run([BIN, "launch", "--nproc-per-node", "1", FIXTURE], env=env, timeout=240)
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        m = re.search(r"root cause: rank 0 \[[^\]]+\] raised KeyError.*\n  at (.*)\n  traceback: (\S+)", p.stderr)
        self.assertIsNotNone(m, p.stderr[-3000:])
        self.assertRegex(m.group(1), r'^File ".*raise_in_stdlib\.py", line 11, in main$')
        with open(m.group(2)) as f:
            stack = json.load(f)["message"]["extraInfo"]["py_callstack"]
        self.assertIn("<frozen os>", stack)  # the whole stack stays in the file


if __name__ == "__main__":
    unittest.main()
