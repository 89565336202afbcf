"""gpudiag launch names the rank that raised on its own as the root cause,
even when a rank that only saw its peer's failure ended first (a busy
machine's order): real torch ranks with @record error files."""
import os
import re
import tempfile
import unittest

from harness import have_torch, run
from test_launch_torch import FIXTURES, env_without_threads, BIN


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class RootCauseOrder(unittest.TestCase):
    def test_a_peers_failure_that_ends_first_is_not_the_root_cause(self):
        with tempfile.TemporaryDirectory() as d:
            env = env_without_threads()
            env["CONSEQUENCE_DIR"] = d
            # A long grace: rank 1 ends after rank 0, whatever the load.
            p = run([BIN, "launch", "--nproc-per-node", "2", "--grace", "120",
                     os.path.join(FIXTURES, "consequence_first.py")], env=env, timeout=240)
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertRegex(p.stderr, r"rank 0 \(pid \d+\) failed first", p.stderr[-3000:])
        m = re.search(r"gpudiag launch: root cause: rank (\d+) \[[^\]]+\] raised (.*)", p.stderr)
        self.assertIsNotNone(m, p.stderr[-3000:])
        self.assertEqual(m.group(1), "1", p.stderr[-3000:])
        self.assertIn("ValueError: step 2 went wrong on rank 1", m.group(2))
        self.assertIn("(rank 0 ended first, of a peer's failure seen from it: RuntimeError: "
                      "[../third_party/gloo", p.stderr)


if __name__ == "__main__":
    unittest.main()
