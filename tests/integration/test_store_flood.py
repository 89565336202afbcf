"""A connection flood from another local user (issue 53): user `nobody` keeps
hundreds of connections reconnecting to a job's MASTER_PORT, as fast as the
kernel lets it, for as long as the job runs. The store must go on serving
its ranks between batches of accepts, and identify each newcomer without
re-reading every socket of the host, so the job ends OK: two nodes sharing a
secret, and a single-node launch with no secret at all.

Real processes on loopback. The flooder is `python3 -c` with the standard
library only, run by `runuser` as `nobody`; it starts before the job (its
connections are refused until the store listens) and says how many it made
while the job ran, which must be thousands: a flood that never landed proves
nothing."""
import os
import subprocess
import sys
import unittest

from harness import BIN, free_port, ok_lines, strip_prefix

ARGS = ["check", "--backend", "host", "--size", "1MiB", "--mem", "1MiB", "--iters", "2",
        "--timeout", "60"]
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# flood PORT HELD: keeps HELD connections open, each replaced as soon as it is
# made (the oldest closed), in 4 threads; "ready" once one connection landed;
# on stdin's end, prints the number of connections made and exits.
FLOODER = r'''
import socket, sys, threading, collections
port, held = int(sys.argv[1]), int(sys.argv[2])
made = [0] * 4
stop = threading.Event()
ready = threading.Event()
def flood(i):
    open_ = collections.deque()
    while not stop.is_set():
        try:
            c = socket.socket()
            c.setblocking(True)
            c.settimeout(2)
            c.connect(("127.0.0.1", port))
            made[i] += 1
            ready.set()
            open_.append(c)
            while len(open_) > held // 4:
                open_.popleft().close()
        except OSError:
            c.close()
            stop.wait(0.001)
threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in range(4)]
for t in threads: t.start()
ready.wait()
print("ready", flush=True)
sys.stdin.read()
stop.set()
print("made", sum(made), flush=True)
'''


class StoreFlood(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run the flooder as user nobody (runuser)")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()

    def start(self, cmd, env=None, stdin=None):
        p = subprocess.Popen(cmd, env=env, stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def finish(self, p, timeout=180):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError("a hang: " + err[-3000:])
        return p.returncode, out, err

    def flood(self, port, held=300):
        return self.start(["runuser", "-u", "nobody", "--", PYTHON, "-c", FLOODER, str(port),
                           str(held)], stdin=subprocess.PIPE)

    def made(self, flooder):
        out, err = flooder.communicate("", timeout=60)
        self.assertEqual(flooder.returncode, 0, err[-2000:])
        return int(out.split("made")[-1])

    def env(self):
        return {k: v for k, v in os.environ.items() if not k.startswith("GPUDIAG_")}

    def test_a_single_node_launch_without_a_secret_ends_ok_under_a_flood(self):
        port = free_port()
        flooder = self.flood(port)
        job = self.start([BIN, "launch", "--nproc-per-node", "2", "--master-port", str(port),
                          "--", *ARGS], self.env())
        code, out, err = self.finish(job)
        made = self.made(flooder)
        self.assertEqual(code, 0, err[-3000:])
        self.assertEqual(len(ok_lines(strip_prefix(out))), 2, out)
        self.assertGreater(made, 1000, "the flood never landed")

    def test_two_nodes_sharing_a_secret_end_ok_under_a_flood(self):
        port, secret = free_port(), "a-flooded-jobs-secret"
        flooder = self.flood(port)
        node = [BIN, "launch", "--nproc-per-node", "2", "--nnodes", "2", "--master-addr",
                "127.0.0.1", "--master-port", str(port)]
        env = dict(self.env(), GPUDIAG_SECRET=secret)
        n0 = self.start([*node, "--node-rank", "0", "--", *ARGS], env)
        # The flood is on before node 1 joins: every rank meets under it.
        self.assertEqual(flooder.stdout.readline().strip(), "ready")
        n1 = self.start([*node, "--node-rank", "1", "--", *ARGS], env)
        c0, out0, err0 = self.finish(n0)
        c1, out1, err1 = self.finish(n1)
        made = self.made(flooder)
        self.assertEqual((c0, c1), (0, 0), err0[-3000:] + err1[-3000:])
        self.assertEqual(len(ok_lines(strip_prefix(out0 + out1))), 4, out0 + out1)
        self.assertGreater(made, 1000, "the flood never landed")


if __name__ == "__main__":
    unittest.main()
