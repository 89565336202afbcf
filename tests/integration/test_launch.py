"""gpudiag launch, end to end: the real binary starting real processes.

Children are mostly `sh -c ...` or Python scripts run with --no-gpudiag, so
the launcher is tested on its own: the environment each rank gets, whole
prefixed lines under heavy concurrent output, exit statuses, the first-failure
report and the stop that follows, signals to the launcher, no process left
behind, and one-line errors for bad arguments.
"""

import os
import re
import signal
import subprocess
import sys
import shutil
import tempfile
import time
import unittest

BIN = os.environ.get("GPUDIAG_BIN", "")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def run(*args, timeout=60, env=None):
    """Runs `gpudiag launch ARGS` to its end; returns the CompletedProcess."""
    return subprocess.run(
        [BIN, "launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def alive(pid):
    """True while `pid` runs; a zombie waiting to be reaped counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


def rank_lines(text):
    """{rank: [line, ...]} from "[rankN]: line" lines; fails on any other line."""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\[rank(\d+)\]: (.*)", line)
        if not m:
            raise AssertionError(f"line without a rank prefix: {line[:120]!r}")
        out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def launcher_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("gpudiag launch: ")]


class LaunchedJob:
    """A launcher started in the background whose children each print their
    pid (and that of a background grandchild) on stdout before waiting."""

    def __init__(self, test, nproc, script, *extra):
        self.test = test
        self.nproc = nproc
        self.proc = subprocess.Popen(
            [BIN, "launch", "--nproc-per-node", str(nproc), *extra, "--no-gpudiag", "--",
             "sh", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        test.addCleanup(self._cleanup)
        self.pids = []
        self.pids = self._read_pids()

    def _cleanup(self):
        """Whatever an assertion left running: the launcher, then every pid seen."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _read_pids(self):
        pids = []
        deadline = time.monotonic() + 20
        while len(pids) < 2 * self.nproc and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.fullmatch(r"\[rank\d+\]: pids (\d+) (\d+)\n", line)
            if m:
                pids += [int(m.group(1)), int(m.group(2))]
        self.test.assertEqual(len(pids), 2 * self.nproc, "children did not report their pids")
        return pids

    def finish(self, timeout):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.test.fail(f"the launcher was still running after {timeout} s")
        return self.proc.returncode, out, err


# Prints the shell's pid and a background sleeper's, then waits on the sleeper.
PIDS_THEN_WAIT = 'sleep 1000 & echo "pids $$ $!"; wait'


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class Environment(unittest.TestCase):
    SHOW = ('echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK '
            '$GROUP_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $GPUDIAG_LAUNCH_ID $GPUDIAG_TOKEN '
            '${TORCHELASTIC_USE_AGENT_STORE:-unset}"')

    def show(self, *args, env=None):
        r = run(*args, "--no-gpudiag", "--", "sh", "-c", self.SHOW, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {rank: lines[0].split() for rank, lines in rank_lines(r.stdout).items()}

    def test_single_node(self):
        env = dict(os.environ, RANK="99", WORLD_SIZE="100", TORCHELASTIC_USE_AGENT_STORE="True")
        ranks = self.show("--nproc-per-node", "3", env=env)
        self.assertEqual(sorted(ranks), [0, 1, 2])
        for rank, v in ranks.items():
            self.assertEqual(v[:8], [str(rank), str(rank), "3", "3", "0", "1", "127.0.0.1", v[7]])
            self.assertTrue(1 <= int(v[7]) <= 65535, v)
            self.assertEqual(v[10], "unset", "an outer torchrun's variables must not leak")
        # One job: every rank has the same port, launch id and token.
        self.assertEqual(len({tuple(v[7:10]) for v in ranks.values()}), 1)
        self.assertRegex(ranks[0][9], r"^[0-9a-f]{32}$")
        # A new job: a new token.
        self.assertNotEqual(self.show("--nproc-per-node", "1")[0][9], ranks[0][9])

    def test_second_of_two_nodes(self):
        args = ["--nproc-per-node", "4", "--nnodes", "2", "--node-rank", "1",
                "--master-addr", "10.1.2.3", "--master-port", "29555"]
        env = {k: v for k, v in os.environ.items() if k != "GPUDIAG_TOKEN"}
        env.update(SLURM_JOB_ID="55", SLURM_STEP_ID="2")
        ranks = self.show(*args, env=env)
        self.assertEqual(sorted(ranks), [4, 5, 6, 7])
        for rank, v in ranks.items():
            self.assertEqual(v[:8], [str(rank), str(rank - 4), "8", "4", "1", "2", "10.1.2.3",
                                     "29555"])
        # Node 0, launched separately, derives the same token without talking to node 1.
        node0 = self.show(*[a if a != "1" else "0" for a in args], env=env)
        self.assertEqual(sorted(node0), [0, 1, 2, 3])
        self.assertEqual(node0[0][9], "slurm-55.2")
        self.assertEqual(ranks[4][9], "slurm-55.2")
        # An exported token wins.
        exported = self.show(*args, env=dict(env, GPUDIAG_TOKEN="sesame"))
        self.assertEqual(exported[4][9], "sesame")

    def test_default_port_for_several_nodes_is_29500(self):
        ranks = self.show("--nnodes", "2", "--node-rank", "0", "--master-addr", "node0")
        self.assertEqual(ranks[0][7], "29500")

    def test_runs_the_gpudiag_binary_itself(self):
        r = run("--nproc-per-node", "2", "--", "scan", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = rank_lines(r.stdout)
        self.assertEqual(sorted(lines), [0, 1])
        real = os.path.realpath(BIN)
        for rank in (0, 1):
            self.assertTrue(any(f"{real} scan" in l for l in lines[rank]), lines[rank])


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class Check(unittest.TestCase):
    def test_ranks_of_check_meet_and_each_prints_its_ok_line(self):
        r = run("--nproc-per-node", "3", "--", "check", "--backend", "host", "--mem", "4096",
                "--size", "4096", "--iters", "1", "--timeout", "30", timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = rank_lines(r.stdout)
        for rank in range(3):
            self.assertTrue(
                any(re.fullmatch(rf"\[.+-{rank}\] is OK \(global rank: {rank}/3\)", l)
                    for l in lines[rank]), lines[rank])
        self.assertEqual(launcher_lines(r.stderr)[-1], "gpudiag launch: 3/3 ranks OK")


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class Output(unittest.TestCase):
    # Each rank writes LINES long lines to stdout and stderr in random pieces,
    # so lines arrive split across reads and mixed with other ranks' pieces.
    WRITER = r"""
import os, random, sys
rank = int(os.environ["RANK"]); n = int(sys.argv[1]); rnd = random.Random(rank)
for i in range(n):
    for fd in (1, 2):
        line = ("rank%d %s %d " % (rank, "out" if fd == 1 else "err", i)
                + "x" * rnd.randint(0, 6000) + " end\n").encode()
        while line:
            cut = rnd.randint(1, len(line))
            os.write(fd, line[:cut]); line = line[cut:]
os.write(1, b"tail without newline")
"""
    LINES = 1500

    def check_stream(self, text, stream, prefixed):
        seen = {}
        for line in text.splitlines():
            if stream == "err" and line.startswith("gpudiag launch: "):
                continue
            body = line
            if prefixed:
                m = re.fullmatch(r"\[rank(\d+)\]: (.*)", line)
                self.assertIsNotNone(m, f"unprefixed line {line[:80]!r}")
                tag, body = int(m.group(1)), m.group(2)
            if body.startswith("tail"):
                self.assertEqual(body, "tail without newline")
                continue
            m = re.fullmatch(r"rank(\d+) (out|err) (\d+) x* end", body)
            self.assertIsNotNone(m, f"broken or mixed line {body[:80]!r}...{body[-40:]!r}")
            rank = int(m.group(1))
            if prefixed:
                self.assertEqual(tag, rank, "line carries another rank's prefix")
            self.assertEqual(m.group(2), stream, "a line went to the wrong stream")
            seen.setdefault(rank, []).append(int(m.group(3)))
        for rank in range(4):
            self.assertEqual(seen.get(rank), list(range(self.LINES)), f"rank {rank} lines")

    def test_whole_prefixed_lines_under_heavy_output(self):
        r = run("--nproc-per-node", "4", "--no-gpudiag", "--", PYTHON, "-c", self.WRITER,
                str(self.LINES), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.check_stream(r.stdout, "out", prefixed=True)
        self.check_stream(r.stderr, "err", prefixed=True)
        # The unterminated last line of every rank is flushed, once.
        self.assertEqual(r.stdout.count("tail without newline\n"), 4)
        self.assertEqual(launcher_lines(r.stderr), ["gpudiag launch: 4/4 ranks OK"])

    def test_no_prefix(self):
        r = run("--nproc-per-node", "4", "--no-prefix", "--no-gpudiag", "--", PYTHON, "-c",
                self.WRITER, str(self.LINES), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.check_stream(r.stdout, "out", prefixed=False)
        self.check_stream(r.stderr, "err", prefixed=False)

    def test_reader_going_away_does_not_kill_the_job(self):
        # Like `gpudiag launch ... | head -1`: the launcher must outlive its reader.
        p = subprocess.Popen(
            [BIN, "launch", "--nproc-per-node", "2", "--no-gpudiag", "--", "sh", "-c",
             "sleep 0.3; i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); done"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        p.stderr.close()
        self.assertEqual(p.wait(timeout=30), 0, err)
        self.assertIn("2/2 ranks OK", err)


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class Failures(unittest.TestCase):
    def test_all_ok_is_zero(self):
        r = run("--nproc-per-node", "3", "--no-gpudiag", "--", "true")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(launcher_lines(r.stderr), ["gpudiag launch: 3/3 ranks OK"])

    def test_exit_status_is_the_failing_ranks(self):
        r = run("--nproc-per-node", "3", "--no-gpudiag", "--", "sh", "-c",
                '[ "$RANK" = 1 ] && exit 42; exit 0')
        self.assertEqual(r.returncode, 42, r.stderr)
        self.assertRegex(r.stderr, r"rank 1 \(pid \d+\) failed first: exited with status 42")
        self.assertIn("2/3 ranks OK; rank 1 exited with status 42 (first failure)", r.stderr)

    def test_killed_by_a_signal_is_128_plus_signal(self):
        r = run("--nproc-per-node", "2", "--no-gpudiag", "--", "sh", "-c",
                '[ "$RANK" = 0 ] && kill -KILL $$; exit 0')
        self.assertEqual(r.returncode, 128 + 9, r.stderr)
        self.assertRegex(r.stderr, r"rank 0 \(pid \d+\) failed first: killed by SIGKILL")

    def test_first_failure_stops_the_others_after_the_grace_period(self):
        # Rank 2 fails at once; rank 1 uses the grace period to say something
        # and fail too; ranks 0 and 3 would sleep forever, rank 3 even ignoring
        # SIGTERM, so it takes SIGKILL.
        script = """
case $RANK in
  2) echo "pids $$ $$"; echo "rank 2 broke" >&2; exit 3 ;;
  1) sleep 1000 & echo "pids $$ $!"; sleep 0.3; echo "rank 1 saw rank 2 go" >&2; exit 1 ;;
  3) trap '' TERM; sleep 1000 & echo "pids $$ $!"; while true; do sleep 0.05; done ;;
  *) sleep 1000 & echo "pids $$ $!"; wait ;;
esac"""
        start = time.monotonic()
        r = run("--nproc-per-node", "4", "--grace", "1.5", "--kill-after", "1", "--no-gpudiag",
                "--", "sh", "-c", script, timeout=30)
        elapsed = time.monotonic() - start
        # Rank 2 failed first with 3, rank 1 then named the failure: 1 (README, "Exit status").
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertGreater(elapsed, 1.5, "the others did not get their grace period")
        self.assertLess(elapsed, 1.5 + 1 + 3, "the others were not stopped in time")
        said = launcher_lines(r.stderr)
        self.assertRegex(said[0], r"^gpudiag launch: rank 2 \(pid \d+\) failed first: "
                                  r"exited with status 3; ranks 0,1,3 have 1\.5 s to finish")
        self.assertIn("[rank2]: rank 2 broke", r.stderr)
        self.assertIn("[rank1]: rank 1 saw rank 2 go", r.stderr)
        # The line that broke comes before the launcher's report of it.
        self.assertLess(r.stderr.index("rank 2 broke"), r.stderr.index("failed first"))
        self.assertIn("rank 2 exited with status 3 (first failure)", said[-1])
        self.assertIn("rank 1 exited with status 1;", said[-1])
        self.assertIn("rank 0 killed by SIGTERM (stopped by the launcher)", said[-1])
        self.assertIn("rank 3 killed by SIGKILL (stopped by the launcher)", said[-1])
        self.assertTrue(said[-1].endswith("; exit status 1"), said[-1])
        pids = [int(p) for p in re.findall(r"pids (\d+) (\d+)", r.stdout) for p in p]
        self.assertEqual(len(pids), 8, r.stdout)
        self.assertEqual(wait_gone(pids, 2), [], "processes outlived the job")

    def test_timeout_stops_the_job_with_status_3(self):
        start = time.monotonic()
        r = run("--nproc-per-node", "2", "--timeout", "1", "--no-gpudiag", "--", "sleep", "1000")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertLess(time.monotonic() - start, 60)  # stopped, not the 1000 s sleep
        self.assertIn("job still running after --timeout 1 s", r.stderr)
        # Debian's sleep is stripped: its frame is named by file and offset.
        if shutil.which("eu-stack") or shutil.which("gdb"):
            self.assertRegex(r.stderr, r"ranks 0,1 are in sleep\+0x[0-9a-f]+\n", r.stderr)


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class Signals(unittest.TestCase):
    def test_sigterm_is_forwarded_to_every_rank(self):
        script = ('trap \'echo "rank $RANK got TERM"; exit 0\' TERM; '
                  'sleep 1000 & echo "pids $$ $!"; wait')
        job = LaunchedJob(self, 3, script, "--kill-after", "60")
        start = time.monotonic()
        job.proc.send_signal(signal.SIGTERM)
        status, out, err = job.finish(timeout=20)
        self.assertLess(time.monotonic() - start, 5, "ranks did not get the SIGTERM")
        self.assertEqual(status, 128 + signal.SIGTERM, err)
        self.assertIn("got SIGTERM; forwarding it to ranks 0-2", err)
        for rank in range(3):
            self.assertIn(f"[rank{rank}]: rank {rank} got TERM", out)
        self.assertIn("gpudiag launch: 3/3 ranks OK; interrupted by SIGTERM; exit status 143", err)
        self.assertEqual(wait_gone(job.pids, 2), [], "orphans left after SIGTERM")

    def test_sigterm_or_sighup_stops_every_child_and_grandchild(self):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal=sig.name):
                job = LaunchedJob(self, 3, PIDS_THEN_WAIT)
                job.proc.send_signal(sig)
                status, _, err = job.finish(timeout=20)
                self.assertEqual(status, 128 + sig, err)
                self.assertIn(f"ranks 0-2 killed by {sig.name} (stopped by the launcher)", err)
                self.assertEqual(wait_gone(job.pids, 2), [], f"orphans left after {sig.name}")

    def test_second_sigint_kills_at_once(self):
        script = 'trap "echo ignoring INT" INT TERM; echo "pids $$ $$"; ' \
                 'while true; do sleep 0.05; done'
        job = LaunchedJob(self, 2, script, "--kill-after", "60")
        job.proc.send_signal(signal.SIGINT)
        # Wait for both ranks to say they got the forwarded one: an event, not a pause.
        seen = 0
        while seen < 2:
            line = job.proc.stdout.readline()
            self.assertTrue(line, "the launcher ended after one SIGINT")
            seen += "ignoring INT" in line
        self.assertIsNone(job.proc.poll(), "one SIGINT to children that ignore it ended the job")
        start = time.monotonic()
        job.proc.send_signal(signal.SIGINT)
        status, _, err = job.finish(timeout=20)
        self.assertLess(time.monotonic() - start, 5, "second SIGINT did not kill at once")
        self.assertEqual(status, 128 + signal.SIGINT, err)
        self.assertIn("got SIGINT again; sending SIGKILL to ranks 0,1", err)
        self.assertIn("ranks 0,1 killed by SIGKILL (stopped by the launcher)", err)
        self.assertEqual(wait_gone(job.pids, 2), [])

    def test_children_die_with_a_killed_launcher(self):
        job = LaunchedJob(self, 2, PIDS_THEN_WAIT)
        job.proc.kill()
        job.finish(timeout=20)
        shells = job.pids[0::2]  # the ranks themselves (PR_SET_PDEATHSIG)
        self.assertEqual(wait_gone(shells, 5), [], "ranks outlived a SIGKILLed launcher")
        # Their grandchildren are beyond the launcher's reach: the cleanup kills them.


@unittest.skipUnless(BIN and os.path.exists(BIN), "GPUDIAG_BIN is not set to the built binary")
class BadArguments(unittest.TestCase):
    CASES = [
        (["--nproc-per-node", "0", "--", "check"], "--nproc-per-node must be between 1 and"),
        (["--nproc-per-node", "99999", "--", "check"], "--nproc-per-node must be between 1 and"),
        (["--nnodes", "0", "--", "check"], "--nnodes must be between"),
        (["--nnodes", "2", "--node-rank", "2", "--master-addr", "n0", "--", "check"],
         "--node-rank 2 is outside [0, 2)"),
        (["--node-rank", "-1", "--", "check"], "--node-rank -1 is outside"),
        (["--master-port", "70000", "--", "check"], "--master-port 70000 is not a TCP port"),
        (["--nnodes", "2", "--node-rank", "1", "--", "check"], "--nnodes 2 needs --master-addr"),
        (["--nproc-per-node", "2"], "no command after '--'"),
        (["--nproc-per-node", "2", "--"], "no command after '--'"),
        (["--", "chek"], "'chek' is neither a file nor a gpudiag subcommand (did you mean 'check'?)"),
        (["--", "launch", "--", "check"], "'launch' cannot run inside 'launch'"),
        (["--grace", "-1", "--", "check"], "--grace: must be a number of seconds from 0"),
        (["--no-gpudiag", "--", "no-such-program-here"], "'no-such-program-here' not found"),
    ]

    def test_each_is_one_line_and_exit_2(self):
        for args, expected in self.CASES:
            with self.subTest(args=args):
                r = run(*args, timeout=20)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "", "a child ran despite the bad arguments")
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith(("gpudiag: launch: ", "gpudiag: --")), lines[0])
                self.assertIn(expected, lines[0])


if __name__ == "__main__":
    unittest.main()


class PythonsOfTheirOwn(unittest.TestCase):
    """The stack hook (a sitecustomize on PYTHONPATH) under Pythons that have
    no sitecustomize of their own (pyenv, conda and python.org builds; Debian's
    python3 has one): every rank ran with "Error in sitecustomize ...
    KeyError: 'sitecustomize'" on its stderr."""

    def test_the_stack_hook_is_silent_in_every_python_here(self):
        root = "/root/.pyenv/versions"
        pythons = sorted(os.path.join(root, v, "bin", "python3") for v in os.listdir(root)
                         if v.startswith("3.")) if os.path.isdir(root) else []
        pythons = [p for p in pythons if os.access(p, os.X_OK)] + ["/usr/bin/python3"]
        if len(pythons) < 2:
            self.skipTest("no Python other than Debian's here (pyenv versions)")
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "hello.py")
            with open(script, "w") as f:
                f.write("import sys\nprint('hello from', sys.version_info[:2], flush=True)\n")
            for python in pythons:
                with self.subTest(python=python):
                    env = dict(os.environ, PYTHON_EXEC=python)
                    p = subprocess.run([BIN, "launch", "--nproc-per-node", "2", script], env=env,
                                       capture_output=True, text=True, timeout=120)
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assertEqual(p.stdout.count("hello from"), 2, p.stdout)
                    self.assertNotIn("Error in sitecustomize", p.stderr)
                    self.assertNotIn("KeyError", p.stderr)


class RootCauseWords(unittest.TestCase):
    """How a Python rank that fails first is described when it raised nothing
    (sys.exit, or the OOM killer's SIGKILL), and the private folder a
    successful launch leaves behind (none)."""

    def launch_script(self, body, tmp):
        with open(os.path.join(tmp, "rank.py"), "w") as f:
            f.write(body)
        env = dict(os.environ, TMPDIR=tmp, PYTHON_EXEC="/usr/bin/python3")
        return subprocess.run([BIN, "launch", "--nproc-per-node", "1", os.path.join(tmp, "rank.py")],
                              env=env, capture_output=True, text=True, timeout=120)

    def test_sys_exit_is_not_called_a_missing_error_file(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.launch_script("import sys\nsys.exit(7)\n", d)
            self.assertEqual(p.returncode, 7, p.stderr)
            self.assertIn("exited with status 7 without raising an exception", p.stderr)
            self.assertNotIn("wrote no error file", p.stderr)

    def test_sigkill_says_what_the_memory_counters_saw(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.launch_script("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", d)
            self.assertEqual(p.returncode, 137, p.stderr)
            m = re.search(r"root cause: rank 0 \[[^\]]+\] was killed by SIGKILL; (.*)", p.stderr)
            self.assertIsNotNone(m, p.stderr)
            self.assertRegex(m.group(1), r"OOM kill|memory cgroup")

    def test_a_successful_python_launch_leaves_no_folder(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.launch_script("print('fine')\n", d)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual([n for n in os.listdir(d) if n.startswith("gpudiag-launch-")], [])
            p = self.launch_script("raise SystemExit(3)\n", d)
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertEqual(len([n for n in os.listdir(d) if n.startswith("gpudiag-launch-")]), 1,
                             "a failed launch keeps its error files")
