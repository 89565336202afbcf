"""--hang-timeout on real torch ranks (Debian's torch 1.13, gloo): a job is
stopped only when some rank waits for another and nothing progresses
(docs/launch.md, "Which rank is the job waiting for"). Every rank asleep or
spinning in one line of its own past the limit, or a job of one rank, is left
alone and says so once; a rank that waits in a gloo all_reduce or in
store.wait() for a rank asleep is stopped, and the sleeper named."""
import os
import re
import unittest

from harness import have_torch
from test_launch_torch import FIXTURES, launch

QUIET = os.path.abspath(os.path.join(FIXTURES, "quiet_ranks.py"))


def not_stopped(limit, one_rank=False):
    return ("gpudiag launch: no progress for %d s, but no rank waits for another%s: not stopped"
            % (limit, " (a 1-rank job)" if one_rank else ""))


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class QuietRanksAreLeftAlone(unittest.TestCase):
    """Both ranks stay 8 s in one line, past --hang-timeout 3 (a slow load, a
    long CPU step): nothing progresses, but nobody waits for anybody."""

    def check_left_alone(self, mode):
        p = launch("--nproc-per-node", "2", "--hang-timeout", "3", QUIET, mode, "8")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(sorted(re.findall(r"rank (\d): done", p.stdout)), ["0", "1"], p.stdout)
        self.assertNotIn("where the ranks are", p.stderr)
        self.assertEqual(p.stderr.count(not_stopped(3)), 1, p.stderr[-3000:])

    def test_every_rank_asleep_in_one_line(self):
        self.check_left_alone("sleep")

    def test_every_rank_in_one_cpu_bound_line(self):
        self.check_left_alone("cpu")

    def test_a_job_of_one_rank_is_never_stopped(self):
        p = launch("--nproc-per-node", "1", "--hang-timeout", "2", QUIET, "alone", "6")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("done", p.stdout)
        self.assertEqual(p.stderr.count(not_stopped(2, one_rank=True)), 1, p.stderr[-3000:])


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class ARankWaitingForAnotherIsStopped(unittest.TestCase):
    """Rank 1 sleeps forever; rank 0 waits for it."""

    def check_stopped(self, mode, wait):
        p = launch("--nproc-per-node", "2", "--hang-timeout", "3", QUIET, mode, "3600")
        self.assertEqual(p.returncode, 3, p.stderr[-3000:])
        self.assertIn("stopped by --hang-timeout 3 s", p.stderr)
        block = p.stderr[p.stderr.index("where the ranks are"):]
        self.assertIn("the others wait for rank 1\n", block)
        self.assertRegex(block, r"rank 1 \[[^\]]+-1\] is in quiet_ranks\.py:\d+ in <module>")
        self.assertRegex(block, r"rank 0 \[[^\]]+-0\] waits in " + wait + r" from quiet_ranks\.py:\d+ in <module>")

    def test_a_rank_in_a_gloo_all_reduce(self):
        self.check_stopped("allreduce", r"all_reduce \(distributed_c10d\.py:\d+\)")

    def test_a_rank_in_store_wait_called_from_its_own_code(self):
        # Its Python frame is the script's; its native frames are c10d's store.
        self.check_stopped("store", r"c10d::\w+Store::\w+")


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class TheProgressThreadEndsWithTheRank(unittest.TestCase):
    """The hook's progress thread reads torch's sequence number while the rank
    runs; when the rank's program ends with its process group alive, the thread
    is joined at shutdown, never ended inside torch's call (as a daemon it was:
    'terminate called without an active exception', status 134, 1 run in 5)."""

    def test_a_rank_that_ends_with_its_group_alive_exits_cleanly(self):
        env = {"GPUDIAG_PROGRESS_EVERY_S": "0"}  # sample without a pause
        for _ in range(3):
            p = launch("--nproc-per-node", "1", "--hang-timeout", "600",
                       os.path.join(FIXTURES, "ends_with_group.py"), extra_env=env)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            self.assertIn("progress thread: daemon=False", p.stdout)
            self.assertIn("all-reduces done", p.stdout)
            self.assertNotIn("terminate called", p.stderr)
