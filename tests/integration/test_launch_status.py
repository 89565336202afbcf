"""gpudiag launch's exit status, end to end: the same fault gives the same
status on every run, whichever rank ends first (README, "Exit status").

The ranks are `sh -c` scripts run with --no-gpudiag. The order of their ends
is forced, never hoped for: a rank that must end later blocks reading a fifo
that the test writes only once the launcher has said, on its stderr, that the
other rank failed first. The test holds each fifo open for reading and writing
itself, so neither side can block on opening it.

Also here: a master port already in use under the launcher is one line and
exit status 2 before any rank starts.
"""

import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import unittest

BIN = os.environ.get("GPUDIAG_BIN", "")
GUARD_S = 120  # only for a launcher that hangs: these jobs end as soon as their events happen


class Fifos:
    """Named pipes in a fresh folder, each held open (read-write) by the test."""

    def __init__(self, test, *names):
        self.dir = tempfile.TemporaryDirectory()
        test.addCleanup(self.dir.cleanup)
        self.path, self.fd = {}, {}
        for name in names:
            self.path[name] = os.path.join(self.dir.name, name)
            os.mkfifo(self.path[name])
            self.fd[name] = os.open(self.path[name], os.O_RDWR)
            test.addCleanup(os.close, self.fd[name])

    def send(self, name):
        os.write(self.fd[name], b"go\n")


class Launcher:
    """`gpudiag launch ARGS` in the background, killed if the test leaves it running."""

    def __init__(self, test, args, env=None, log_level="warn"):
        self.proc = subprocess.Popen([BIN, "--log-level", log_level, "launch", *args],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.guard = threading.Timer(GUARD_S, self.proc.kill)
        self.guard.start()
        test.addCleanup(self._cleanup)
        self.seen_err = []

    def _cleanup(self):
        self.guard.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()

    def await_err(self, pattern):
        """Reads stderr up to the first line matching `pattern`; returns the match."""
        for line in self.proc.stderr:
            self.seen_err.append(line)
            m = re.search(pattern, line)
            if m:
                return m
        raise AssertionError(f"the launcher ended without saying {pattern!r}:\n"
                             + "".join(self.seen_err))

    def await_out(self, pattern):
        for line in self.proc.stdout:
            m = re.search(pattern, line)
            if m:
                return m
        raise AssertionError(f"no rank printed {pattern!r}")

    def finish(self):
        """Waits for the end; returns (status, stdout, stderr). Reads through the
        file objects, which may hold lines already read ahead by await_*()."""
        rest = {}
        readers = [threading.Thread(target=lambda f=f: rest.__setitem__(f, f.read()))
                   for f in (self.proc.stdout, self.proc.stderr)]
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        self.proc.wait()
        self.guard.cancel()
        return (self.proc.returncode, rest[self.proc.stdout],
                "".join(self.seen_err) + rest[self.proc.stderr])


def summary(err):
    return [l for l in err.splitlines() if l.startswith("gpudiag launch: ")][-1]


# Rank $FIRST exits $FIRST_CODE at once; rank $THEN exits $THEN_CODE once the
# test writes to $GO; the other ranks exit 0.
IN_ORDER = """
case $RANK in
  "$FIRST") exit "$FIRST_CODE" ;;
  "$THEN") read go < "$GO"; exit "$THEN_CODE" ;;
esac
exit 0"""


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class JobStatus(unittest.TestCase):
    def run_in_order(self, first, first_code, then, then_code):
        fifos = Fifos(self, "go")
        env = dict(os.environ, FIRST=str(first), FIRST_CODE=str(first_code), THEN=str(then),
                   THEN_CODE=str(then_code), GO=fifos.path["go"])
        job = Launcher(self, ["--nproc-per-node", "3", "--grace", "600", "--no-gpudiag", "--",
                              "sh", "-c", IN_ORDER], env=env)
        job.await_err(rf"rank {first} \(pid \d+\) failed first: exited with status {first_code}")
        fifos.send("go")
        return job.finish()

    def test_a_named_failure_wins_whichever_rank_ended_first(self):
        # Rank 1 only timed out (3), rank 2 saw the failure (1): the job is 1,
        # also on the run where rank 1's timeout ended first.
        code, _, err = self.run_in_order(1, 3, 2, 1)
        self.assertEqual(code, 1, err)
        self.assertEqual(summary(err), "gpudiag launch: 1/3 ranks OK; rank 1 exited with status 3 "
                                       "(first failure); rank 2 exited with status 1; exit status 1")
        code, _, err = self.run_in_order(2, 1, 1, 3)
        self.assertEqual(code, 1, err)
        self.assertIn("rank 2 exited with status 1 (first failure)", summary(err))

    def test_a_rank_killed_from_outside_wins_over_the_failure_before_it(self):
        # Rank 0 fails first (1). At once (--grace 0) the launcher sends SIGTERM
        # to the others: ranks 1 and 2 die of it, rank 3 ignores it and is then
        # SIGKILLed by someone else. Its death is the job's status (137); the
        # SIGTERMs the launcher sent itself are not.
        fifos = Fifos(self, "ready", "go")
        script = """
case $RANK in
  0) read ready < "$READY"; exit 1 ;;
  3) trap '' TERM; echo "pid $$"; echo ready > "$READY"; read go < "$GO"; exit 0 ;;
  *) exec sleep 1000 ;;
esac"""
        env = dict(os.environ, READY=fifos.path["ready"], GO=fifos.path["go"])
        job = Launcher(self, ["--nproc-per-node", "4", "--grace", "0", "--kill-after", "600",
                              "--no-gpudiag", "--", "sh", "-c", script], env=env)
        pid = int(job.await_out(r"^\[rank3\]: pid (\d+)$")[1])
        job.await_err(r"^gpudiag launch: ranks 1-3 still running 0 s after rank 0 failed; "
                      r"sending SIGTERM$")
        os.kill(pid, signal.SIGKILL)
        code, _, err = job.finish()
        self.assertEqual(code, 128 + signal.SIGKILL, err)
        self.assertEqual(summary(err), "gpudiag launch: 0/4 ranks OK; rank 0 exited with status 1 "
                                       "(first failure); ranks 1,2 killed by SIGTERM (stopped by "
                                       "the launcher); rank 3 killed by SIGKILL; exit status 137")


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class PortInUse(unittest.TestCase):
    def test_is_one_line_and_status_2_before_any_rank_starts(self):
        with socket.socket() as squatter:
            squatter.bind(("0.0.0.0", 0))
            squatter.listen()
            port = squatter.getsockname()[1]
            # At debug level the launcher logs "launch: ranks 0-1 of 2 ..." as it
            # starts them, and any store connection; the ranks' --timeout is far
            # beyond the guard, so a rank that waited on this port would still be
            # waiting when the guard fired.
            job = Launcher(self, ["--nproc-per-node", "2", "--master-port", str(port), "--",
                                  "check", "--backend", "host", "--timeout", "600"],
                           log_level="debug")
            code, out, err = job.finish()
        self.assertEqual(code, 2, err)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith(f"gpudiag: port {port} is already in use on this "
                                            "host ("), lines[0])
        self.assertIn("pick another MASTER_PORT", lines[0])
        self.assertEqual(out, "", "a rank started although the store could not be served")


if __name__ == "__main__":
    unittest.main()
