"""gpudiag launch and its ranks' native stacks, end to end.

Asked for the ranks' stacks (SIGUSR1) while a rank dies during the taking and
another fails because of it: the rank that died is the root cause, reaped when
it died, and is not reported as a stack that could not be read. Stacks are
taken in parallel in their own threads, so the supervisor still reaps; with
them taken one after another in its loop, the dead rank was reaped after
the others and the wrong rank named first (the mistake torchrun makes).

A silent native rank whose code moves between half --hang-timeout and the
limit (its stack differs) makes progress: the job is not stopped as hung."""
import os
import signal
import subprocess
import tempfile
import unittest

from harness import BIN, SOURCE_DIR, clean_env

FIXTURE = os.path.join(SOURCE_DIR, "tests", "fixtures", "launch", "killed_while_traced.sh")


@unittest.skipUnless(os.access("/usr/bin/eu-stack", os.X_OK), "needs elfutils' eu-stack")
class RankDiesWhileStacksAreTaken(unittest.TestCase):
    def test_the_rank_that_died_is_the_root_cause(self):
        # eu-stack, early on PATH, kills rank 1 as its stack is asked for.
        tools = tempfile.mkdtemp()
        os.symlink(FIXTURE, os.path.join(tools, "eu-stack"))
        self.addCleanup(subprocess.run, ["rm", "-rf", tools])
        env = clean_env()
        env["PATH"] = tools + ":" + env.get("PATH", "/usr/bin:/bin")
        env["KT_DIR"] = tools  # rank 0 exits 1 once rank 1 is gone, as a peer would
        proc = subprocess.Popen([BIN, "launch", "--nproc-per-node", "2", "--no-python", FIXTURE], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready = set()
            for line in proc.stdout:  # both ranks running, rank 1's watcher with it
                if " ready" in line:
                    ready.add(line.split()[-2])
                if len(ready) == 2:
                    break
            proc.send_signal(signal.SIGUSR1)
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        self.assertNotEqual(proc.returncode, 0, err[-3000:])
        self.assertRegex(err, r"rank 1 \(pid \d+\) failed first: killed by SIGKILL", err[-3000:])
        self.assertIn("rank 1 killed by SIGKILL (first failure)", err, err[-3000:])
        self.assertIn("root cause: rank 1 [", err, err[-3000:])
        self.assertIn("rank 0 exited with status 1", err, err[-3000:])
        self.assertIn("no stack (it exited while its stack was taken (killed by SIGKILL))", err)
        self.assertNotRegex(err, r"rank 0 \(pid \d+\) failed first", err[-3000:])
        self.assertNotIn("ptrace not permitted", err, err[-3000:])


@unittest.skipUnless(os.access("/usr/bin/eu-stack", os.X_OK) or os.access("/usr/bin/gdb", os.X_OK),
                     "needs elfutils' eu-stack or gdb")
class SilentNativeRankThatMoves(unittest.TestCase):
    def test_is_not_stopped_as_hung(self):
        # The workload: sh waits on its first sleep (8 s), then becomes the
        # second sleep (8 s more); it prints nothing. The watch reads its stack
        # at half the limit (5 s: sh waiting, 3 s before the exec, room for a
        # slow stack reader on a loaded machine) and at the limit (10 s: the
        # sleep, 6 s before it ends): it moved, so the job runs to its end.
        # Checked only at the limit, both stacks would be the sleep's, and the
        # watch would call the job hung.
        p = subprocess.run([BIN, "launch", "--nproc-per-node", "1", "--hang-timeout", "10", "--no-python",
                            "sh", "-c", "sleep 8; exec sleep 8"], env=clean_env(),
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertNotIn("hang-timeout", p.stderr, p.stderr[-3000:])
        self.assertIn("1/1 ranks OK", p.stderr)


if __name__ == "__main__":
    unittest.main()
