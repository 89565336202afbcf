"""Ranks started by hand (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT) meet through
the rendezvous store; every fault below must end non-zero within the timeout
plus 10 s and name the cause and the ranks."""
import os
import signal
import socket
import threading
import time
import unittest

from harness import BIN, Ranks, broken_lines, children_by_rank, free_port, ok_lines, rank_env, run

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
        args = ["check", "--size", "1MiB", "--mem", "256MiB", "--iters", "1", "--timeout", str(TIMEOUT)]
        self.ranks, _ = start(4, args=args)
        # Rank 3 stops while the others test their memory, after joining the store.
        time.sleep(1.0)
        self.ranks.procs[3].send_signal(signal.SIGSTOP)
        try:
            took = self.ranks.wait(LIMIT, skip=(3,))
        finally:
            self.ranks.procs[3].send_signal(signal.SIGCONT)
        self.assertLess(took, LIMIT)
        out = self.ranks.stdout(skip=(3,))
        broken = broken_lines(out)
        self.assertEqual(len(broken), 3, out)
        for m in broken:
            self.assertRegex(m["reason"], r"rank 3( \[\S+-3\])? did not reach the \S+ checkpoint")
            self.assertIn(f"pid {self.ranks.procs[3].pid}", m["reason"])
        self.assertTrue(all(self.ranks.codes[r] == 3 for r in range(3)), self.ranks.codes)

    def test_rank_killed_during_all_reduce(self):
        # A large all-reduce repeated many times keeps the ranks inside it.
        self.ranks, _ = start(4, args=["check", "--size", "64MiB", "--iters", "200",
                                       "--mem", "1MiB", "--timeout", str(TIMEOUT)])
        deadline = time.monotonic() + 60
        killed = False
        while time.monotonic() < deadline and not killed:
            time.sleep(0.2)
            try:
                with open(f"/proc/{self.ranks.procs[2].pid}/status") as f:
                    pass
            except FileNotFoundError:
                break
            if self._in_all_reduce():
                self.ranks.procs[2].send_signal(signal.SIGKILL)
                killed = True
        self.assertTrue(killed, "never saw the ranks reach the all-reduce")
        took = self.ranks.wait(LIMIT, skip=(2,))
        self.ranks.procs[2].wait()
        self.assertLess(took, LIMIT)
        out = self.ranks.stdout(skip=(2,))
        broken = broken_lines(out)
        self.assertEqual(len(broken), 3, out)
        self.assertTrue(any("rank 2" in m["reason"] for m in broken), out)
        self.assertTrue(all(c != 0 for i, c in enumerate(self.ranks.codes) if i != 2))

    def _in_all_reduce(self):
        # The ring sockets of the all-reduce exist once the communicator phase ended:
        # count established TCP connections of rank 0 beyond the store's one.
        pid = self.ranks.procs[0].pid
        try:
            return len(os.listdir(f"/proc/{pid}/fd")) >= 8 and time.sleep(1.0) is None
        except FileNotFoundError:
            return False

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


if __name__ == "__main__":
    unittest.main()


class UnderLaunch(unittest.TestCase):
    def launch(self, *check_args, n=4, grace=3):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_", "PMIX", "SLURM_", "TORCHELASTIC_", "GPUDIAG_"))}
        import subprocess
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
        self.launch("--size", "64MiB", "--iters", "500", "--mem", "1MiB", "--timeout", str(TIMEOUT),
                    grace=8)
        kids = self.wait_children(4)
        time.sleep(3.0)  # well into the timed all-reduce iterations
        os.kill(kids[2], signal.SIGKILL)
        start = time.monotonic()
        out, err = self.proc.communicate(timeout=LIMIT)
        self.assertLess(time.monotonic() - start, LIMIT)
        self.assertEqual(self.proc.returncode, 137, err)  # the first failure: SIGKILL
        broken = broken_lines("\n".join(l.split("]: ", 1)[-1] for l in out.splitlines()))
        self.assertEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertIn(f"rank 2 [", m["reason"])
            self.assertIn(f"(pid {kids[2]})", m["reason"] + out)
        self.assertIn("was killed by SIGKILL", out)
        self.assertIn("rank 2", err)

    def test_rank_stopped_is_named_with_its_phase(self):
        self.launch("--size", "1MiB", "--iters", "1", "--mem", "256MiB", "--timeout", str(TIMEOUT))
        kids = self.wait_children(4)
        time.sleep(0.5)
        os.kill(kids[3], signal.SIGSTOP)
        start = time.monotonic()
        try:
            out, err = self.proc.communicate(timeout=LIMIT + 8)  # + grace and kill-after
        finally:
            try:
                os.kill(kids[3], signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.assertLess(time.monotonic() - start, LIMIT + 8)
        self.assertNotEqual(self.proc.returncode, 0)
        lines = "\n".join(l.split("]: ", 1)[-1] for l in out.splitlines())
        broken = broken_lines(lines)
        self.assertGreaterEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertRegex(m["reason"], r"rank 3 .*did not reach the \S+ checkpoint")
            self.assertIn(f"pid {kids[3]}", m["reason"])
            self.assertIn("last phase:", m["reason"])

    def test_rank_stopped_inside_the_all_reduce_is_named_not_its_neighbour(self):
        # The others time out inside the collective, waiting on whichever peer
        # they exchange with; each must still name the stopped rank first.
        self.launch("--size", "64MiB", "--iters", "500", "--mem", "1MiB", "--timeout", str(TIMEOUT))
        kids = self.wait_children(4)
        time.sleep(3.0)  # well into the timed all-reduce iterations
        os.kill(kids[1], signal.SIGSTOP)
        start = time.monotonic()
        try:
            out, err = self.proc.communicate(timeout=LIMIT + 8)
        finally:
            try:
                os.kill(kids[1], signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.assertLess(time.monotonic() - start, LIMIT + 8)
        self.assertNotEqual(self.proc.returncode, 0)
        broken = broken_lines("\n".join(l.split("]: ", 1)[-1] for l in out.splitlines()))
        self.assertGreaterEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertRegex(m["reason"], r"^rank 1 \[\S+-1\] did not reach the all-reduce checkpoint")
            self.assertIn(f"pid {kids[1]}", m["reason"])
