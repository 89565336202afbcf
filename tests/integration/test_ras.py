"""`gpudiag ras` and `gpudiag launch`'s hang report against the model of NCCL's RAS socket
(tests/ras_model: made from NCCL's source; test_ras_protocol.py holds it to the protocol,
and to a real NCCL where one runs): what a user reads (the finding lines, whom they name,
the exit status, the JSON), for each NCCL's format, and for sockets that misbehave."""
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from harness import BIN, SOURCE_DIR, TORCH_PYTHON, children_by_rank, clean_env, free_port, have_torch

sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "ras_model"))
import ras_scenarios  # noqa: E402
from ras_server import RasModel  # noqa: E402

FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures", "ras")
TRAIN = os.path.join(SOURCE_DIR, "tests", "fixtures", "torch", "train.py")


def read(path):
    with open(path) as f:
        return f.read()


def ras(*args, env=None, timeout=60):
    return subprocess.run([BIN, "ras", *args], capture_output=True, text=True, timeout=timeout,
                          env=env or clean_env())


class Findings(unittest.TestCase):
    def test_a_healthy_job(self):
        for v in ("2.24.3", "2.26.6", "2.28.9", "2.30.7"):
            with self.subTest(version=v), RasModel(ras_scenarios.healthy(v)) as m:
                p = ras(m.address())
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("ras: %s: NCCL %s (%s): 4 processes on 1 node, 1 communicator" %
                              (m.address(), v, "json" if v >= "2.28.7" else "text"), p.stdout)
                self.assertTrue(p.stdout.endswith("ras: RAS saw nothing wrong\n"), p.stdout)

    def test_what_it_asks(self):
        with RasModel(ras_scenarios.healthy("2.30.7")) as m:
            ras(m.address(), "--timeout", "2")
            self.assertEqual(m.commands, ["CLIENT PROTOCOL 2", "TIMEOUT 2", "SET FORMAT json", "VERBOSE STATUS"])
        with RasModel(ras_scenarios.healthy("2.26.6")) as m:
            p = ras(m.address())
            self.assertEqual(m.commands, ["CLIENT PROTOCOL 2", "TIMEOUT 5", "SET FORMAT json", "VERBOSE STATUS"])
            self.assertIn("note: %s: this NCCL has no JSON report (SET FORMAT came in 2.28.7)" % m.address(),
                          p.stdout)
        with RasModel(ras_scenarios.healthy("2.30.7")) as m:
            ras(m.address(), "--format", "text")
            self.assertEqual(m.commands, ["CLIENT PROTOCOL 2", "TIMEOUT 5", "VERBOSE STATUS"])

    def test_a_rank_behind(self):
        for v in ("2.26.6", "2.30.7"):
            with self.subTest(version=v), RasModel(ras_scenarios.behind(v)) as m:
                p = ras(m.address())
                self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                self.assertIn("mismatch: communicator 5a1e4c0ffee12345 (4 ranks): AllReduce counts differ: ",
                              p.stdout)
                self.assertIn("rank 3 (process 4003 on 127.0.0.1) issued 119; behind: rank 3\n", p.stdout)
        with RasModel(ras_scenarios.behind("2.24.3")) as m:  # one count of every collective
            p = ras(m.address())
            self.assertIn("collective counts differ: 3 ranks issued 122, rank 3 (process 4003 on "
                          "127.0.0.1) issued 121; behind: rank 3", p.stdout)

    def test_a_dead_process_in_28s_broken_json(self):
        with RasModel(ras_scenarios.dead("2.28.9")) as m:
            p = ras(m.address(), "--json", "-")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("dead: process 4003 on 10.0.0.2 (GPU 1; rank 3 of communicator "
                          "5a1e4c0ffee12345): RAS cannot reach it over its network", p.stderr)
            self.assertIn("note: the JSON lacked the comma after a missing rank's nvml_dev", p.stderr)
            doc = json.loads(p.stdout)
            self.assertEqual(doc["schema"], "gpudiag-ras/1")
            self.assertEqual(doc["exit_status"], 1)
            self.assertEqual(doc["merged"]["dead"], [{"host": "10.0.0.2", "pid": 4003, "gpus": "1"}])
            self.assertEqual(doc["endpoints"][0]["format"], "json")

    def test_a_silent_process_makes_ras_wait_its_timeout(self):
        with RasModel(ras_scenarios.silent("2.30.7")) as m:
            t0 = time.monotonic()
            p = ras(m.address(), "--timeout", "1")
            self.assertGreaterEqual(time.monotonic() - t0, 1.0)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("unresponsive: process 4002 on 127.0.0.1 (GPU 2; rank 2 of communicator "
                          "5a1e4c0ffee12345): no answer to RAS within its timeout", p.stdout)
            self.assertIn("note: RAS timed out 1 time while it gathered: its view of the job is partial",
                          p.stdout)

    def test_errors_and_states(self):
        with RasModel(ras_scenarios.failed("2.26.6")) as m:
            p = ras(m.address())
            self.assertIn("error: communicator 5a1e4c0ffee12345: rank 1 (process 4001 on 127.0.0.1) "
                          "reported an asynchronous error: Remote process error", p.stdout)
        with RasModel(ras_scenarios.aborted("2.30.7")) as m:
            p = ras(m.address())
            self.assertIn("state: communicator 5a1e4c0ffee12345 (4 ranks): ranks are in different "
                          "states: ranks 0,1,3 RUNNING, rank 2 (process 4002 on 127.0.0.1) ABORT", p.stdout)

    def test_every_node_at_once_merged(self):
        with RasModel(ras_scenarios.behind("2.30.7")) as a, RasModel(ras_scenarios.dead("2.26.6")) as b:
            p = ras(a.address(), b.address(), "--json", "-")
            doc = json.loads(p.stdout)
            self.assertEqual([e["answered"] for e in doc["endpoints"]], [True, True])
            self.assertEqual(len(doc["merged"]["mismatches"]), 1)
            self.assertEqual(len(doc["merged"]["dead"]), 1)
            self.assertEqual(p.returncode, 1)

    def test_nccl_ras_addr_is_the_default(self):
        with RasModel(ras_scenarios.healthy("2.30.7")) as m:
            env = clean_env()
            env["NCCL_RAS_ADDR"] = m.address()
            p = ras(env=env)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(m.connections, 1)


class Misbehaving(unittest.TestCase):
    """Everything from the socket is a stranger's: one line, exit 3, never a hang."""

    def fault(self, fault, *args, **kw):
        with RasModel(ras_scenarios.behind("2.30.7"), fault=fault, **kw) as m:
            t0 = time.monotonic()
            p = ras(m.address(), "--timeout", "1", *args)
            took = time.monotonic() - t0
        self.assertEqual(p.returncode, 3, (fault, p.stdout, p.stderr))
        self.assertLess(took, 1 + 6 + 3, fault)
        no_answer = [l for l in p.stdout.splitlines() if ": no answer: " in l]
        self.assertEqual(len(no_answer), 1, p.stdout)
        self.assertTrue(p.stdout.endswith("ras: no RAS answered: nothing is known about the job from it\n"))
        return no_answer[0], took

    def test_silent(self):
        line, took = self.fault("silent")
        self.assertIn("was accepted and never answered: a stopped or hung process holds the port", line)

    def test_garbage(self):
        line, _ = self.fault("garbage")
        self.assertIn("not NCCL RAS at 127.0.0.1:", line)
        self.assertTrue(line.isprintable(), line)

    def test_a_reply_that_is_not_a_report(self):
        line, _ = self.fault("garbage-reply")
        self.assertIn("JSON", line)

    def test_oversized(self):
        line, _ = self.fault("oversized", "--max-reply", "1MiB")
        self.assertIn("RAS's reply passed 1 MiB (--max-reply)", line)

    def test_cut_short(self):
        line, _ = self.fault("close-early")
        self.assertIn("does not parse", line)

    def test_a_trickle(self):
        line, took = self.fault("slow", drip_s=0.05)
        self.assertIn("did not finish within 7.00 s", line)  # TIMEOUT 1 + 6, as ncclras waits
        self.assertGreater(took, 6)

    def test_nothing_listens(self):
        p = ras("127.0.0.1:%d" % free_port())
        self.assertEqual(p.returncode, 3)
        self.assertIn("refused", p.stdout)
        self.assertIn("; try: check that the job runs NCCL 2.24 or later", p.stdout)

    def test_another_protocol_is_read_and_said(self):
        with RasModel(ras_scenarios.behind("2.30.7"), fault="bad-protocol") as m:
            p = ras(m.address())
        self.assertEqual(p.returncode, 1)
        self.assertIn("note: RAS speaks protocol 3 (gpudiag knows 2)", p.stdout)

    def test_bad_usage(self):
        for bad in (["node:0"], ["[::1"], ["--timeout", "0"], ["--format", "xml"]):
            p = ras(*bad)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


class LaunchAsksRas(unittest.TestCase):
    """gpudiag launch asks its node's RAS when it reports a hang and after the first failure,
    and names RAS's processes by its own ranks. The model's job is made when RAS is asked,
    from the ranks that exist then (their pids), as NCCL's RAS would describe them."""

    def launch(self, env_extra, *args, timeout=120):
        env = clean_env()
        env.update(env_extra)
        return subprocess.Popen([BIN, "launch", *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def finish(self, proc, timeout=120):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError("launch still running after %d s: %s" % (timeout, err))
        return proc.returncode, out, err

    def behind_job(self, launcher):
        """Rank 1 issued one all-reduce fewer: it stopped before its next collective."""
        def job():
            pids = children_by_rank(launcher())
            return ras_scenarios.combo("2.28.9", pids=[pids[0], pids[1]], behind_rank=1)
        return job

    def test_a_hang_report_names_the_rank_behind(self):
        holder = {}
        with RasModel(self.behind_job(lambda: holder["pid"]), version="2.28.9") as m:
            # --timeout reports where the ranks are (asking RAS) and stops the job: sleeping ranks
            # wait for no other, so --hang-timeout would leave them alone.
            p = self.launch({"NCCL_RAS_ADDR": m.address()}, "--nproc-per-node", "2", "--timeout", "3",
                            "--no-python", "sleep", "600")
            holder["pid"] = p.pid
            code, _, err = self.finish(p)
        self.assertEqual(code, 3, err)
        self.assertIn("gpudiag launch: NCCL RAS at %s (NCCL_RAS_ADDR=%s; --timeout 3 s): NCCL 2.28.9 "
                      "(json): 2 processes on 1 node, 1 communicator" % (m.address(), m.address()), err)
        self.assertRegex(err, r"\n  mismatch: communicator 5a1e4c0ffee12345 \(2 ranks\): AllReduce counts "
                              r"differ: rank 0 \(rank 0 \[[^\]]+-0\] pid \d+\) issued 8, rank 1 \(rank 1 "
                              r"\[[^\]]+-1\] pid \d+\) issued 7; behind: rank 1\n")
        # Who answered: the model is this test, a process of the job's user.
        self.assertIn("\n  answered by a process of this job's user (uid %d) that is not one of this "
                      "node's ranks\n" % os.geteuid(), err)
        # After the stacks, before the job is stopped.
        self.assertLess(err.index("where the ranks are"), err.index("NCCL RAS at"))
        self.assertLess(err.index("NCCL RAS at"), err.index("job still running after --timeout"))

    def test_after_the_first_failure_the_survivors_ras_names_it(self):
        with tempfile.TemporaryDirectory() as d:
            def job():
                pids = [int(read(os.path.join(d, "rank%d.pid" % r))) for r in (0, 1)]
                j = ras_scenarios.combo("2.30.7", pids=pids, behind_rank=1)
                j.processes[1].answers = False
                return j
            with RasModel(job, version="2.30.7") as m:
                script = 'echo $$ > %s/rank$RANK.pid; [ "$RANK" = 1 ] && exit 3; exec sleep 600' % d
                p = self.launch({"NCCL_RAS_ADDR": m.address()}, "--nproc-per-node", "2", "--grace", "8",
                                "--no-python", "sh", "-c", script)
                code, _, err = self.finish(p)
            pid1 = read(os.path.join(d, "rank1.pid")).strip()
        self.assertEqual(code, 3, err)
        self.assertIn("NCCL RAS at %s (NCCL_RAS_ADDR=%s; after rank 1 failed first): NCCL 2.30.7 (json)"
                      % (m.address(), m.address()), err)
        self.assertRegex(err, r"\n  unresponsive: rank 1 \[[^\]]+-1\] pid %s \(GPU 1; rank 1 of "
                              r"communicator 5a1e4c0ffee12345\): no answer to RAS within its timeout" % pid1)
        self.assertLess(err.index("failed first"), err.index("NCCL RAS at"))

    def test_when_nothing_answers_one_line_says_so(self):
        port = free_port()
        p = self.launch({"NCCL_RAS_ADDR": "127.0.0.1:%d" % port}, "--nproc-per-node", "2", "--timeout", "2",
                        "--no-python", "sleep", "600")
        code, _, err = self.finish(p)
        self.assertEqual(code, 3, err)
        lines = [l for l in err.splitlines() if "NCCL RAS" in l]
        self.assertEqual(lines, ["gpudiag launch: NCCL RAS at 127.0.0.1:%d (NCCL_RAS_ADDR=127.0.0.1:%d; "
                                 "--timeout 2 s): nothing listens there (the ranks run no NCCL 2.24 or "
                                 "later with RAS on this node, or not yet): nothing is known from it"
                                 % (port, port)])

    def test_ras_turned_off_is_not_asked(self):
        p = self.launch({"NCCL_RAS_ENABLE": "0"}, "--nproc-per-node", "1", "--timeout", "2",
                        "--no-python", "sleep", "600")
        _, _, err = self.finish(p)
        self.assertIn("gpudiag launch: NCCL RAS: not asked: the ranks run with NCCL_RAS_ENABLE=0, so their "
                      "NCCL serves no RAS\n", err)
        with RasModel(ras_scenarios.healthy()) as m:
            p = self.launch({"NCCL_RAS_ADDR": m.address()}, "--nproc-per-node", "1", "--timeout", "2",
                            "--nccl-ras-timeout", "0", "--no-python", "sleep", "600")
            _, _, err = self.finish(p)
            self.assertNotIn("NCCL RAS", err)
            self.assertEqual(m.connections, 0)

    @unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
    def test_a_hung_training_script(self):
        holder = {}
        with RasModel(self.behind_job(lambda: holder["pid"]), version="2.28.9") as m:
            env = {"NCCL_RAS_ADDR": m.address(), "PYTHON_EXEC": TORCH_PYTHON}
            p = self.launch(env, "--nproc-per-node", "2", "--hang-timeout", "5", TRAIN, "--steps", "8",
                            "--hang-rank", "1", "--hang-step", "3")
            holder["pid"] = p.pid
            code, out, err = self.finish(p, timeout=240)
        self.assertEqual(code, 3, err[-3000:])
        self.assertIn("rank 1 sleeping at step 3", out)
        self.assertRegex(err, r"NCCL RAS at %s \(NCCL_RAS_ADDR=%s; --hang-timeout 5 s\): NCCL 2.28.9 \(json\)"
                         % (m.address(), m.address()))
        self.assertRegex(err, r"\n  mismatch: .* rank 1 \(rank 1 \[[^\]]+-1\] pid \d+\) issued 7; behind: rank 1\n")


class Fixtures(unittest.TestCase):
    def test_committed_fixtures_are_what_the_model_writes(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.path.join(FIXTURES, "make_fixtures.py"), d)
            env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE_DIR, "tests", "ras_model"))
            subprocess.run([sys.executable, os.path.join(d, "make_fixtures.py")], check=True, env=env)
            written = sorted(f for f in os.listdir(d) if f != "make_fixtures.py")
            committed = sorted(f for f in os.listdir(FIXTURES) if f not in ("make_fixtures.py", "SOURCES.md"))
            self.assertEqual(written, committed)
            for f in written:
                self.assertTrue(filecmp.cmp(os.path.join(d, f), os.path.join(FIXTURES, f), shallow=False), f)


if __name__ == "__main__":
    unittest.main()
