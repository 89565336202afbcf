"""Two hosts made of network namespaces joined by veth (10.77.0.1 and
10.77.0.2), each running `gpudiag launch --nnodes 2 --node-rank K
--nproc-per-node 2`, with its own host name."""
import os
import subprocess
import time
import unittest

from harness import BIN, SOURCE_DIR, broken_lines, clean_env, ok_lines, run, strip_prefix

NETNS = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")
PREFIX = "gdt"
MASTER = "10.77.0.1"


def node_cmd(ns, hostname, node_rank, port, *check_args, timeout=8):
    inner = (f"hostname {hostname}; exec {BIN} launch --nnodes 2 --node-rank {node_rank} "
             f"--nproc-per-node 2 --master-addr {MASTER} --master-port {port} --grace 3 -- check "
             + " ".join(check_args) + f" --timeout {timeout}")
    return ["ip", "netns", "exec", f"{PREFIX}-{ns}", "unshare", "--uts", "sh", "-c", inner]


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class TwoHosts(unittest.TestCase):
    def setUp(self):
        p = run([NETNS, "up", PREFIX], timeout=30)
        if p.returncode != 0:
            self.skipTest("cannot create network namespaces here: " + p.stderr.strip())
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        run([NETNS, "down", PREFIX], timeout=30)

    def start(self, ns, hostname, node_rank, port, *args):
        p = subprocess.Popen(node_cmd(ns, hostname, node_rank, port, *args), env=clean_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def test_four_ranks_on_two_hosts_are_ok(self):
        a = self.start("a", "node-a", 0, 29600, "--size", "4MiB", "--iters", "1")
        b = self.start("b", "node-b", 1, 29600, "--size", "4MiB", "--iters", "1")
        out_b, err_b = b.communicate(timeout=120)
        out_a, err_a = a.communicate(timeout=120)
        self.assertEqual((a.returncode, b.returncode), (0, 0), err_a + err_b)
        oks = ok_lines(strip_prefix(out_a + out_b))
        self.assertEqual(sorted(int(m["rank"]) for m in oks), [0, 1, 2, 3])
        self.assertEqual(sorted(m["host"] for m in oks), ["node-a", "node-a", "node-b", "node-b"])
        self.assertIn("on 2 hosts", out_a)

    def test_link_down_during_rendezvous_names_the_unreachable_host(self):
        run([NETNS, "link-down", PREFIX], timeout=30)
        start = time.monotonic()
        a = self.start("a", "node-a", 0, 29601, "--size", "4MiB", "--iters", "1")
        b = self.start("b", "node-b", 1, 29601, "--size", "4MiB", "--iters", "1")
        out_b, err_b = b.communicate(timeout=60)
        out_a, err_a = a.communicate(timeout=60)
        self.assertLess(time.monotonic() - start, 8 + 10 + 6)
        self.assertNotEqual(a.returncode, 0)
        self.assertNotEqual(b.returncode, 0)
        # node-b's ranks cannot reach node-a's store and say where they tried.
        self.assertIn(f"cannot reach the store at {MASTER}:29601", err_b)
        # node-a's ranks name the ranks of node-b that never joined.
        broken = broken_lines(strip_prefix(out_a))
        self.assertEqual(len(broken), 2, out_a + err_a)
        for m in broken:
            self.assertIn("rank 2 did not reach the exchange checkpoint", m["reason"])
            self.assertIn("never joined the store", m["reason"])


if __name__ == "__main__":
    unittest.main()
