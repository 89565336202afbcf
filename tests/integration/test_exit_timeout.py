"""gpudiag launch and a rank that hangs after its status line (a classic
CUDA/NCCL teardown hang): the launcher reports it and kills it after
--exit-timeout, instead of waiting forever.

The hanging rank is a real program run with --no-gpudiag that prints a
status line and then blocks on a pipe nobody writes to."""
import subprocess
import time
import unittest

from harness import BIN

HANG_AFTER_OK = ('echo "[$(hostname -s)-$LOCAL_RANK] is OK (global rank: $RANK/$WORLD_SIZE)"; '
                 'exec tail -f /dev/null')  # blocks until killed


class ExitTimeout(unittest.TestCase):
    def launch(self, *extra, script=HANG_AFTER_OK, limit=60):
        p = subprocess.Popen([BIN, "launch", "--nproc-per-node", "2", *extra, "--no-gpudiag", "--",
                              "sh", "-c", script],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            start = time.monotonic()
            out, err = p.communicate(timeout=limit)
            return p.returncode, out, err, time.monotonic() - start
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()

    def test_a_rank_hung_after_its_status_is_reported_and_killed(self):
        code, out, err, took = self.launch("--exit-timeout", "1")
        self.assertEqual(len([l for l in out.splitlines() if "is OK (global rank" in l]), 2, out)
        self.assertIn("printed its status but did not exit within --exit-timeout 1", err)
        self.assertIn("a hang in teardown", err)
        # The launcher's own deadline stopped the job: 3 (README, "Exit status").
        self.assertEqual(code, 3, err)
        self.assertTrue(err.rstrip().endswith("killed at --exit-timeout 1 s; exit status 3"), err)
        self.assertLess(took, 30)

    def test_ranks_that_exit_are_not_touched(self):
        code, out, err, _ = self.launch("--exit-timeout", "1",
                                        script=HANG_AFTER_OK.replace("exec tail -f /dev/null", "exit 0"))
        self.assertEqual(code, 0, err)
        self.assertNotIn("did not exit", err)

    def test_the_option_refuses_nonsense(self):
        r = subprocess.run([BIN, "launch", "--exit-timeout", "nan", "--", "check"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--exit-timeout", r.stderr)


if __name__ == "__main__":
    unittest.main()
