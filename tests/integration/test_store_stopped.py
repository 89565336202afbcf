"""The process serving the store stops (SIGSTOP, a debugger, a swapped-out
host): its kernel still accepts connections and takes bytes, so nothing
closes, and before this every other rank waited out its --timeout and then
blamed its peers. Now every rank that waits on the store names it: "rank 0
[host] serving the store at ADDR stopped answering", exit status 1, within
--timeout plus a few seconds.

The store's process is stopped at an exact point, never after a guessed
sleep: rank 0 by the check's own hook (GPUDIAG_TEST_RAISE), the launcher by
the test once the rank it holds back has stopped itself (state 'T')."""
import os
import re
import signal
import subprocess
import time
import unittest

from harness import (BIN, Ranks, broken_lines, children_by_rank, clean_env, free_port, process_state,
                     raise_at, rank_env, resume, strip_prefix, wait_stopped)

TIMEOUT = 6
LIMIT = TIMEOUT + 10
ARGS = ["check", "--size", "1MiB", "--mem", "1MiB", "--iters", "1", "--timeout", str(TIMEOUT)]


def wait_ended(pid, timeout=LIMIT + 20):
    """Waits until `pid` (a child of a stopped launcher) has exited: state 'Z' or gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process_state(pid) in (None, "Z", "X"):
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still running after {timeout}s: a hang")


class StoreStopped(unittest.TestCase):
    def tearDown(self):
        if getattr(self, "ranks", None):
            self.ranks.kill()

    def test_rank_zero_serving_the_store_stopped(self):
        port = free_port()
        envs = [rank_env(r, 4, port, extra=raise_at("SIGSTOP@all-reduce") if r == 0 else None)
                for r in range(4)]
        self.ranks = Ranks(envs, ARGS)
        server = self.ranks.procs[0].pid
        try:
            wait_stopped(server)
            took = self.ranks.wait(LIMIT, skip=(0,))
        finally:
            resume(server)
        self.assertLess(took, LIMIT)
        self.assertEqual(self.ranks.codes[1:], [1, 1, 1], self.ranks.err)
        out = self.ranks.stdout(skip=(0,))
        broken = broken_lines(out)
        self.assertEqual(len(broken), 3, out)
        for m in broken:
            self.assertRegex(m["reason"], rf"rank 0 \[[^\]]+\] serving the store at "
                                          rf"127\.0\.0\.1:{port} stopped answering")

    def test_launcher_serving_the_store_stopped(self):
        env = clean_env()
        env.update(raise_at("SIGSTOP@device:2"))  # rank 2 holds the others at the exchange
        launcher = subprocess.Popen([BIN, "launch", "--nproc-per-node", "3", "--", *ARGS], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        kids = {}
        try:
            deadline = time.monotonic() + 60
            while len(kids) < 3 and time.monotonic() < deadline and launcher.poll() is None:
                kids = children_by_rank(launcher.pid)
                time.sleep(0.02)
            self.assertEqual(len(kids), 3, "the launcher did not start 3 ranks")
            wait_stopped(kids[2])
            launcher.send_signal(signal.SIGSTOP)
            wait_stopped(launcher.pid)
            for r in (0, 1):
                wait_ended(kids[r])
        finally:
            resume(launcher.pid)
            for pid in kids.values():
                resume(pid)
        out, _ = launcher.communicate(timeout=LIMIT + 60)
        self.assertNotEqual(launcher.returncode, 0, out)
        lines = strip_prefix(out)
        for r in (0, 1):
            self.assertRegex(out, rf"\[rank{r}\]: .*is broken: .*gpudiag launch \[[^\]]+\] serving "
                                  rf"the store at \S+ stopped answering", lines)


if __name__ == "__main__":
    unittest.main()
