"""`gpudiag ras` and `gpudiag launch` on jobs whose counts differ: the skew of a busy, healthy
job (NCCL counts a collective at host launch and RAS reads each process at its own moment)
moves between two samples and is no finding; a rank whose count differs and does not move is
`behind`. And NCCL 2.26 to 2.28.9's text report, whose communicators after one with missing
ranks are read from misaligned bytes. The jobs are the model's (tests/ras_model): a Moving
job's counts grow at each STATUS, so the samples need no wall time between them."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from harness import BIN, SOURCE_DIR, children_by_rank, clean_env

sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "ras_model"))
import ras_scenarios  # noqa: E402
from ras_job import Moving  # noqa: E402
from ras_server import RasModel  # noqa: E402

GAP = "0.1"  # the counts move at each STATUS: any gap will do


def ras(*args, env=None, timeout=60):
    return subprocess.run([BIN, "ras", *args], capture_output=True, text=True, timeout=timeout,
                          env=env or clean_env())


class Skew(unittest.TestCase):
    def test_a_busy_job_is_in_flight_not_behind(self):
        for v in ("2.26.6", "2.28.9", "2.30.7"):
            for fmt in ("auto", "text"):
                with self.subTest(version=v, format=fmt), RasModel(ras_scenarios.busy(v)) as m:
                    p = ras(m.address(), "--sample-gap", GAP, "--format", fmt)
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assertNotIn("behind", p.stdout)
                    self.assertNotIn("mismatch:", p.stdout)
                    self.assertIn("in flight: communicator 5a1e4c0ffee12345 (4 ranks): AllReduce counts "
                                  "differ: ", p.stdout)
                    self.assertTrue(p.stdout.endswith(
                        "ras: RAS saw nothing wrong: the counts that differed were in flight\n"), p.stdout)
                    self.assertEqual(m.commands.count("VERBOSE STATUS"), 2)
                    self.assertEqual(m.connections, 2)

    def test_skewed_by_two_and_moving_is_no_finding(self):
        with RasModel(ras_scenarios.skewed("2.30.7")) as m:
            p = ras(m.address(), "--sample-gap", GAP, "--json", "-")
        doc = json.loads(p.stdout)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["exit_status"], 0)
        self.assertEqual(doc["findings"], [])
        self.assertEqual(doc["merged"]["samples"], 2)
        self.assertEqual(doc["merged"]["mismatches"][0]["motion"], "moved")
        self.assertEqual(len(doc["motion"]), 1)
        self.assertNotIn("behind", p.stdout + p.stderr)

    def test_a_healthy_job_is_asked_once(self):
        with RasModel(ras_scenarios.healthy("2.30.7")) as m:
            p = ras(m.address(), "--sample-gap", GAP)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertEqual(m.connections, 1)

    def test_a_rank_that_does_not_move_is_behind(self):
        with RasModel(ras_scenarios.stuck_among_moving("2.30.7")) as m:
            p = ras(m.address(), "--sample-gap", GAP)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("rank 3 (process 4003 on 127.0.0.1) issued 119; behind: rank 3\n", p.stdout)
        self.assertIn("note: counts that differed were sampled twice, 0.1 s apart", p.stdout)
        for v in ("2.24.3", "2.26.6", "2.28.9"):  # nothing moves at all: a hung job
            with self.subTest(version=v), RasModel(ras_scenarios.behind(v)) as m:
                p = ras(m.address(), "--sample-gap", GAP)
                self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                self.assertIn("; behind: rank 3\n", p.stdout)

    def test_a_second_sample_without_an_answer_claims_nothing(self):
        holder = {}

        def job():  # the second STATUS finds RAS gone
            holder["calls"] = holder.get("calls", 0) + 1
            if holder["calls"] > 1:
                raise OSError("gone")
            return ras_scenarios.behind("2.30.7")
        with RasModel(job, version="2.30.7") as m:
            p = ras(m.address(), "--sample-gap", GAP, "--timeout", "1")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("unconfirmed: communicator 5a1e4c0ffee12345 (4 ranks): AllReduce counts differ: ",
                      p.stdout)
        self.assertIn("one sample only (the second sample got no answer: ", p.stdout)
        self.assertNotIn("behind", p.stdout)


class Misaligned(unittest.TestCase):
    """A silent process (rank 3 missing from the world) and a second communicator after it."""

    def test_rows_of_2_26_to_2_28_9_text_are_marked(self):
        for v, args in (("2.26.6", []), ("2.28.9", ["--format", "text"])):
            with self.subTest(version=v), RasModel(ras_scenarios.misaligned(v)) as m:
                p = ras(m.address(), "--timeout", "1", *args)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("unresponsive: process 4003 on 127.0.0.1", p.stdout)
            rows = [l for l in p.stdout.splitlines() if l.startswith("no data: ")]
            self.assertTrue(rows, p.stdout)
            for row in rows:
                self.assertTrue(row.endswith("; unreliable (NCCL before 2.29.2)"), row)
            self.assertIn("note: NCCL %s's text report reads the communicators after one with missing ranks "
                          "from the wrong bytes (fixed in 2.29.2)" % v, p.stdout)

    def test_json_reads_them_right(self):
        for v in ("2.28.9", "2.30.7"):
            with self.subTest(version=v), RasModel(ras_scenarios.misaligned(v)) as m:
                p = ras(m.address(), "--timeout", "1", "--sample-gap", GAP)
            self.assertNotIn("unreliable", p.stdout)
            self.assertIn("communicator 7ac0ffee00000001 (2 ranks): Broadcast counts differ", p.stdout)
        with RasModel(ras_scenarios.misaligned("2.30.7")) as m:
            p = ras(m.address(), "--timeout", "1", "--format", "text", "--sample-gap", GAP)
        self.assertNotIn("unreliable", p.stdout)


class NcclRasAddr(unittest.TestCase):
    def test_a_portless_address_is_where_nccl_listens(self):
        try:
            m = RasModel(ras_scenarios.healthy("2.30.7"), port=65535)
        except OSError as e:
            self.skipTest("port 65535 is taken here: %s" % e)
        with m:
            env = clean_env()
            env["NCCL_RAS_ADDR"] = "127.0.0.1"
            p = ras(env=env)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("ras: 127.0.0.1:65535: NCCL 2.30.7", p.stdout)


class LaunchSamplesTwice(unittest.TestCase):
    def run_launch(self, env_extra, *args):
        env = clean_env()
        env.update(env_extra)
        p = subprocess.Popen([BIN, "launch", *args], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        return p

    def finish(self, p):
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            raise AssertionError("launch still running: " + err)
        return p.returncode, err

    def busy_of_ranks(self, launcher, version="2.28.9"):
        """A busy job of the launcher's two ranks: counts a launch apart, moving."""
        def base():
            pids = children_by_rank(launcher())
            job = ras_scenarios.combo(version, pids=[pids[0], pids[1]], behind_rank=1)
            return job
        state = {}

        def job():
            if "moving" not in state:
                state["moving"] = Moving(base(), lambda n, r: 2 * n)
            return state["moving"]()
        return job

    def test_a_hang_report_with_moving_counts_says_in_flight(self):
        holder = {}
        with RasModel(self.busy_of_ranks(lambda: holder["pid"]), version="2.28.9") as m:
            # --timeout reports where the ranks are, asks RAS, then stops the job.
            p = self.run_launch({"NCCL_RAS_ADDR": m.address()}, "--nproc-per-node", "2", "--timeout", "3",
                                "--no-python", "sleep", "600")
            holder["pid"] = p.pid
            code, err = self.finish(p)
        self.assertEqual(code, 3, err)
        ras_part = err[err.index("NCCL RAS at"):]
        self.assertIn("\n  in flight: communicator 5a1e4c0ffee12345 (2 ranks): AllReduce counts differ: ", ras_part)
        self.assertIn("\n  RAS saw nothing wrong: the counts that differ were moving\n", ras_part)
        self.assertNotIn("behind", ras_part)

    def test_after_a_failure_with_no_time_for_two_it_says_one(self):
        with tempfile.TemporaryDirectory() as d:
            def job():
                pids = []
                for r in (0, 1, 2):
                    with open(os.path.join(d, "rank%d.pid" % r)) as f:
                        pids.append(int(f.read()))
                return ras_scenarios.combo("2.30.7", pids=pids, behind_rank=1)
            with RasModel(job, version="2.30.7") as m:
                script = ('echo $$ > %s/rank$RANK.pid; [ "$RANK" = 2 ] && '
                          '{ while [ ! -s %s/rank0.pid ] || [ ! -s %s/rank1.pid ]; do sleep 0.05; done; exit 3; }; '
                          'exec sleep 600' % (d, d, d))
                p = self.run_launch({"NCCL_RAS_ADDR": m.address()}, "--nproc-per-node", "3", "--grace", "1",
                                    "--no-python", "sh", "-c", script)
                code, err = self.finish(p)
        self.assertEqual(code, 3, err)
        ras_part = err[err.index("NCCL RAS at"):]
        self.assertIn("after rank 2 failed first", ras_part)
        self.assertIn("\n  unconfirmed: communicator 5a1e4c0ffee12345 (3 ranks): AllReduce counts differ: ",
                      ras_part)
        self.assertIn("one sample only (no time for a second", ras_part)
        self.assertNotIn("behind", ras_part)


if __name__ == "__main__":
    unittest.main()
