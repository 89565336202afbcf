"""Under mpirun, a rank that never reaches MPI_Init (stopped before it) would
hang every other rank inside MPI_Init without a word. The others' watchdog
names the phase and what to check, within --timeout, and the job ends.

The stopped rank stops itself (SIGSTOP to its own shell) before it execs
gpudiag: no timing is guessed."""
import os
import subprocess
import unittest

from harness import BIN, mpirun_env, require, BROKEN_RE


class StuckInMpiInit(unittest.TestCase):
    def test_a_rank_stopped_before_mpi_init_is_reported_by_the_others(self):
        require("mpirun")
        script = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then kill -STOP $$; fi; '
                  f'exec {BIN} check --backend host --timeout 3')
        p = subprocess.Popen(["mpirun", "-np", "2", "--oversubscribe", "sh", "-c", script],
                             env=mpirun_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=90)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.communicate()
        broken = [m for m in (BROKEN_RE.match(l) for l in out.splitlines()) if m]
        self.assertEqual(len(broken), 1, out + err)
        reason = broken[0]["reason"]
        self.assertIn("stuck in MPI_Init", reason)
        self.assertIn("MPI_Init waits for every rank", reason)
        self.assertIn("mpirun", reason)
        self.assertNotEqual(p.returncode, 0, out + err)


if __name__ == "__main__":
    unittest.main()
