"""Ranks started by hand (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT) or by
gpudiag launch meet through the rendezvous store; every fault below must end
non-zero within the timeout plus 10 s and name the cause and the ranks.

A rank is stopped or killed at an exact point by the test hook
GPUDIAG_TEST_RAISE (src/checks/test_hook.h), never after a guessed sleep: with
SIGSTOP the test waits for the process to show state 'T' before it measures."""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (BIN, Ranks, broken_lines, children_by_rank, free_port, ok_lines, raise_at,
                     rank_env, resume, run, strip_prefix, wait_stopped)

TIMEOUT = 6  # --timeout for the faulty runs, seconds
LIMIT = TIMEOUT + 10
ARGS = ["check", "--size", "1MiB", "--mem", "1MiB", "--iters", "1", "--timeout", str(TIMEOUT)]


def start(n, args=ARGS, extra=None, port=None):
    port = port or free_port()
    envs = [rank_env(r, n, port, extra=(extra or {}).get(r)) for r in range(n)]
    return Ranks(envs, args), port


class ByHand(unittest.TestCase):
    def tearDown(self):
        if getattr(self, "ranks", None):
            self.ranks.kill()

    def test_four_processes_started_by_hand_are_ok(self):
        self.ranks, _ = start(4, args=["check", "--size", "16MiB", "--iters", "1"])
        self.ranks.wait(120)
        self.assertEqual(self.ranks.codes, [0, 0, 0, 0], self.ranks.err)
        out = self.ranks.stdout()
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(out)), [0, 1, 2, 3], out)
        self.assertIn("backend=host/tcp", out)

    def test_rank_never_started(self):
        port = free_port()
        self.ranks = Ranks([rank_env(r, 4, port) for r in range(3)], ARGS)
        took = self.ranks.wait(LIMIT)
        self.assertLess(took, LIMIT)
        self.assertTrue(all(c == 3 for c in self.ranks.codes), self.ranks.codes)
        for m in broken_lines(self.ranks.stdout()):
            self.assertIn("rank 3 did not reach the exchange checkpoint", m["reason"])
            self.assertIn("never joined the store", m["reason"])
        self.assertEqual(len(broken_lines(self.ranks.stdout())), 3)

    def test_rank_stopped_after_rendezvous(self):
        # Rank 3 joins the store, then stops as it starts its memory test.
        self.ranks, _ = start(4, extra={3: raise_at("SIGSTOP@device")})
        stopped = self.ranks.procs[3].pid
        try:
            wait_stopped(stopped)
            took = self.ranks.wait(LIMIT, skip=(3,))
        finally:
            resume(stopped)
        self.assertLess(took, LIMIT)
        out = self.ranks.stdout(skip=(3,))
        broken = broken_lines(out)
        self.assertEqual(len(broken), 3, out)
        for m in broken:
            self.assertRegex(m["reason"], r"rank 3( \[\S+-3\])? did not reach the exchange checkpoint")
            self.assertIn(f"pid {stopped}", m["reason"])
            self.assertIn("last phase: device", m["reason"])
        self.assertTrue(all(self.ranks.codes[r] == 3 for r in range(3)), self.ranks.codes)
        self.assertIn("rank 3 gone: last phase: device, did not reach the exchange checkpoint", out)

    def test_rank_killed_during_all_reduce(self):
        # Rank 2 kills itself at the start of the 2nd timed all-reduce, while
        # the others are inside that collective.
        self.ranks, _ = start(4, args=["check", "--size", "4MiB", "--iters", "5", "--mem", "1MiB",
                                       "--timeout", str(TIMEOUT)],
                              extra={2: raise_at("SIGKILL@all-reduce#2")})
        self.ranks.procs[2].wait(timeout=60)
        self.assertEqual(self.ranks.procs[2].returncode, -signal.SIGKILL)
        took = self.ranks.wait(LIMIT, skip=(2,))
        self.assertLess(took, LIMIT)
        out = self.ranks.stdout(skip=(2,))
        broken = broken_lines(out)
        self.assertEqual(len(broken), 3, out)
        # No launcher saw it die; the store (rank 0's) saw its connection close
        # without a goodbye and told everyone, so every survivor names it and
        # exits 1, whether it was in the collective or at a checkpoint.
        for m in broken:
            self.assertIn("rank 2 [", m["reason"])
            self.assertIn("closed its connection to the store in its all-reduce phase", m["reason"])
        self.assertEqual([c for i, c in enumerate(self.ranks.codes) if i != 2], [1, 1, 1])
        self.assertIn("summary: 0/4 ranks OK", out)
        self.assertIn("rank 2 dead: closed its connection to the store in its all-reduce phase", out)

    def test_unresolvable_master_addr(self):
        env = rank_env(1, 2, free_port(), addr="no-such-host.invalid")
        p = run([BIN, *ARGS], env=env, timeout=LIMIT)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("MASTER_ADDR=no-such-host.invalid does not resolve", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_nothing_listening_on_master_port(self):
        env = rank_env(1, 2, free_port())  # rank 0 never starts
        start_t = time.monotonic()
        p = run([BIN, *ARGS], env=env, timeout=LIMIT)
        self.assertLess(time.monotonic() - start_t, LIMIT)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("cannot reach the store at 127.0.0.1:", p.stderr)

    def test_port_taken(self):
        with socket.socket() as squatter:
            squatter.bind(("0.0.0.0", 0))
            squatter.listen()
            port = squatter.getsockname()[1]
            self.ranks, _ = start(2, port=port)
            took = self.ranks.wait(LIMIT)
        self.assertLess(took, LIMIT)
        self.assertEqual(self.ranks.codes[0], 2, self.ranks.err[0])
        self.assertIn(f"port {port} is already in use", self.ranks.err[0])
        self.assertNotEqual(self.ranks.codes[1], 0)

    def test_port_taken_is_reported_before_rank_0_waits_for_anything(self):
        # Rank 1 never starts, so a rank 0 that got past the port would wait
        # for it until --timeout 600; at debug level it would also log the
        # store it serves and the connections it takes. It must only refuse.
        with socket.socket() as squatter:
            squatter.bind(("0.0.0.0", 0))
            squatter.listen()
            port = squatter.getsockname()[1]
            p = run([BIN, "--log-level", "debug", "check", "--backend", "host", "--timeout", "600"],
                    env=rank_env(0, 2, port), timeout=120)
        self.assertEqual(p.returncode, 2, p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith(f"gpudiag: port {port} is already in use on this host"),
                        lines[0])
        self.assertEqual(p.stdout, "")

    def test_world_size_mismatch(self):
        port = free_port()
        envs = [rank_env(r, 4, port) for r in range(4)]
        envs[3]["WORLD_SIZE"] = "5"
        self.ranks = Ranks(envs, ARGS)
        took = self.ranks.wait(LIMIT)
        self.assertLess(took, LIMIT)
        self.assertTrue(all(c != 0 for c in self.ranks.codes), self.ranks.codes)
        out = self.ranks.stdout()
        self.assertIn("world sizes differ between ranks: ranks 0,1,2 say 4; rank 3 say 5", out)

    def test_duplicate_rank(self):
        port = free_port()
        envs = [rank_env(r, 3, port) for r in (0, 1, 1)]
        self.ranks = Ranks(envs, ARGS)
        took = self.ranks.wait(LIMIT)
        self.assertLess(took, LIMIT)
        self.assertTrue(all(c != 0 for c in self.ranks.codes), self.ranks.codes)
        everything = self.ranks.stdout() + "".join(self.ranks.err)
        self.assertIn("duplicate RANK=1", everything)

    def test_wrong_token(self):
        self.ranks, _ = start(3, extra={2: {"GPUDIAG_TOKEN": "some-other-job"}})
        took = self.ranks.wait(LIMIT)
        self.assertLess(took, LIMIT)
        self.assertEqual(self.ranks.codes[2], 2, self.ranks.err[2])
        self.assertIn("belongs to another job", self.ranks.err[2])
        for r in (0, 1):
            self.assertNotEqual(self.ranks.codes[r], 0)
            self.assertIn("rank 2 did not reach the exchange checkpoint", self.ranks.out[r])

    def test_garbage_on_the_store_port_does_not_break_the_check(self):
        port = free_port()
        stop = threading.Event()

        def spray():
            import random
            while not stop.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                        s.sendall(random.randbytes(4096))
                except OSError:
                    pass
                time.sleep(0.05)

        t = threading.Thread(target=spray, daemon=True)
        t.start()
        try:
            self.ranks, _ = start(3, args=["check", "--size", "4MiB", "--iters", "1"], port=port)
            self.ranks.wait(120)
        finally:
            stop.set()
            t.join()
        self.assertEqual(self.ranks.codes, [0, 0, 0], self.ranks.err)
        self.assertEqual(len(ok_lines(self.ranks.stdout())), 3)


class UnderLaunch(unittest.TestCase):
    def launch(self, *check_args, n=4, grace=3, raise_spec=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_", "PMIX", "SLURM_", "TORCHELASTIC_", "GPUDIAG_"))}
        if raise_spec:
            env.update(raise_at(raise_spec))  # every rank inherits it; its :RANK picks one
        self.proc = subprocess.Popen([BIN, "launch", "--nproc-per-node", str(n), "--grace", str(grace),
                                      "--", "check", *check_args], env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self.proc

    def tearDown(self):
        if getattr(self, "proc", None) and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()

    def wait_children(self, n):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            kids = children_by_rank(self.proc.pid)
            if len(kids) == n:
                return kids
            time.sleep(0.1)
        self.fail(f"launcher did not start {n} ranks")

    def test_rank_killed_during_all_reduce_is_named_by_everyone(self):
        # The survivors need about 2.5 s to meet and report after a death (longer on a
        # loaded machine); the launcher's grace must cover that.
        self.launch("--size", "4MiB", "--iters", "5", "--mem", "1MiB", "--timeout", str(TIMEOUT),
                    grace=8, raise_spec="SIGKILL@all-reduce#2:2")
        start = time.monotonic()
        out, err = self.proc.communicate(timeout=LIMIT + 10)
        self.assertLess(time.monotonic() - start, LIMIT)
        self.assertEqual(self.proc.returncode, 137, err)  # the first failure: SIGKILL
        pid = re.search(r"rank 2 \(pid (\d+)\) failed first: killed by SIGKILL", err)
        self.assertTrue(pid, err)
        broken = broken_lines(strip_prefix(out))
        self.assertEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertIn("rank 2 [", m["reason"])
            self.assertIn(f"(pid {pid[1]})", m["reason"])
        self.assertIn("was killed by SIGKILL", out)
        self.assertIn("rank 2", err)

    def test_report_agrees_on_a_rank_killed_in_the_all_reduce(self):
        # Summary, table, status lines, --json and the launcher: 0 of 4 OK, rank 2
        # dead with one phase everywhere, the three others stopped by it.
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "job.json")
            self.launch("--size", "4MiB", "--iters", "5", "--mem", "1MiB", "--timeout", str(TIMEOUT),
                        "--json", report, grace=8, raise_spec="SIGKILL@all-reduce#2:2")
            out, err = self.proc.communicate(timeout=LIMIT + 10)
            with open(report) as f:
                job = json.load(f)
        text = strip_prefix(out)
        where = "last phase: all-reduce, did not reach the all-reduce checkpoint"
        # The launcher.
        last = [l for l in err.splitlines() if l.startswith("gpudiag launch: ")][-1]
        self.assertRegex(last, r"^gpudiag launch: 0/4 ranks OK; rank 2 killed by SIGKILL "
                               r"\(first failure\); ranks 0,1,3 exited with status [13]", err)
        # The status lines: nobody OK, everyone names the dead rank.
        self.assertEqual(ok_lines(text), [], text)
        broken = broken_lines(text)
        self.assertEqual(sorted(int(m["local"]) for m in broken), [0, 1, 3], text)
        for m in broken:
            self.assertRegex(m["reason"], r"^rank 2 \[\S+-2\] ", text)
        # The summary and the table.
        summary = [l for l in text.splitlines() if l.startswith("summary: ")]
        self.assertEqual(len(summary), 1, text)
        self.assertTrue(summary[0].startswith("summary: 0/4 ranks OK on 1 host"), summary[0])
        self.assertIn(f"rank 2 dead: killed by SIGKILL, {where}; ranks 0,1,3 stopped by rank 2",
                      summary[0])
        rows = {int(l.split()[0]): l for l in text.splitlines() if re.match(r"^\d+\s+\S+\s+\d+\s", l)}
        self.assertEqual(sorted(rows), [0, 1, 2, 3], text)
        self.assertTrue(rows[2].endswith(f"DEAD (killed by SIGKILL; {where})"), rows[2])
        for r in (0, 1, 3):
            self.assertTrue(rows[r].endswith("STOPPED by rank 2 (in all-reduce)"), rows[r])
        # One phase for the dead rank wherever one is shown.
        self.assertEqual(set(re.findall(r"last phase: ([\w-]+)", text + err)), {"all-reduce"}, text)
        self.assertNotIn("GONE", text)
        self.assertNotIn("last seen at", text)
        # The JSON report.
        self.assertFalse(job["ok"])
        self.assertEqual(job["ranks_ok"], 0)
        self.assertEqual([r["ok"] for r in job["ranks"]], [False] * 4)
        dead = job["ranks"][2]
        self.assertEqual((dead["status"], dead["death"], dead["last_phase"], dead["phase"],
                          dead["missed_checkpoint"]),
                         ("dead", "killed by SIGKILL", "all-reduce", "all-reduce", "all-reduce"))
        for r in (0, 1, 3):
            self.assertEqual((job["ranks"][r]["status"], job["ranks"][r]["stopped_by"]), ("stopped", 2))
        self.assertEqual(self.proc.returncode, 137, err)

    def test_rank_stopped_is_named_with_its_phase(self):
        self.launch("--size", "1MiB", "--iters", "1", "--mem", "1MiB", "--timeout", str(TIMEOUT),
                    raise_spec="SIGSTOP@device:3")
        kids = self.wait_children(4)
        try:
            wait_stopped(kids[3])
            start = time.monotonic()
            out, err = self.proc.communicate(timeout=LIMIT + 8)  # + grace and kill-after
        finally:
            resume(kids[3])
        self.assertLess(time.monotonic() - start, LIMIT + 8)
        self.assertNotEqual(self.proc.returncode, 0)
        broken = broken_lines(strip_prefix(out))
        self.assertGreaterEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertRegex(m["reason"], r"rank 3 .*did not reach the exchange checkpoint")
            self.assertIn(f"pid {kids[3]}", m["reason"])
            self.assertIn("last phase: device", m["reason"])

    def test_rank_stopped_inside_the_all_reduce_is_named_not_its_neighbour(self):
        # The others time out inside the collective, waiting on whichever peer
        # they exchange with; each must still name the stopped rank first.
        self.launch("--size", "4MiB", "--iters", "5", "--mem", "1MiB", "--timeout", str(TIMEOUT),
                    raise_spec="SIGSTOP@all-reduce#2:1")
        kids = self.wait_children(4)
        try:
            wait_stopped(kids[1])
            start = time.monotonic()
            out, err = self.proc.communicate(timeout=LIMIT + 8)
        finally:
            resume(kids[1])
        self.assertLess(time.monotonic() - start, LIMIT + 8)
        self.assertNotEqual(self.proc.returncode, 0)
        broken = broken_lines(strip_prefix(out))
        self.assertGreaterEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertRegex(m["reason"], r"^rank 1 \[\S+-1\] did not reach the all-reduce checkpoint")
            self.assertIn(f"pid {kids[1]}", m["reason"])
            self.assertIn("last phase: all-reduce", m["reason"])


if __name__ == "__main__":
    unittest.main()
