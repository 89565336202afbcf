"""The link test, `gpudiag bench --links`: every pair of ranks exchanges a
buffer, rank 0 prints the matrix and names slow links. Over real sockets
(gpudiag launch), real MPI (mpirun), and hosts made of network namespaces on a
bridge, one of them behind a real rate limit (tc tbf) as a slow NIC would be."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from harness import (BIN, raise_at, resume, wait_stopped, SOURCE_DIR, broken_lines, children_by_rank, clean_env, mpirun, run,
                     strip_prefix)
from netns_nodes import star

NETNS = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")


def matrix_rows(stdout, by_host=False):
    """{index: [cells]} from the rank matrix's rows ("   2 vm   0.91  -  ..."), or with
    by_host from the host matrix's."""
    text = strip_prefix(stdout)
    before, _, after = text.partition("by host,")
    rows = {}
    for line in (after if by_host else before).splitlines():
        m = re.match(r"^\s*(\d+) (\S+)\s+((?:\s+(?:-|[\d.]+))+)$", line)
        if m:
            rows[int(m.group(1))] = m.group(3).split()
    return rows


class LinksOnOneHost(unittest.TestCase):
    def links(self, *cmd, n):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "links.json")
            p = cmd[0](*cmd[1:], "--json", path)
            report = None
            if os.path.exists(path):
                with open(path) as f:
                    report = json.load(f)
        self.assertIsNotNone(report, p.stdout + p.stderr)
        # Every pair measured once, with a positive bandwidth, on both ends of the matrix.
        pairs = sorted((l["a"], l["b"]) for l in report["links"])
        self.assertEqual(pairs, [(a, b) for a in range(n) for b in range(a + 1, n)])
        self.assertTrue(all(l["gbps"] > 0 for l in report["links"]), report["links"])
        rows = matrix_rows(p.stdout)
        self.assertEqual(sorted(rows), list(range(n)), p.stdout)
        for a in range(n):
            self.assertEqual(rows[a][a], "-")
            for b in range(n):
                self.assertEqual(rows[a][b], rows[b][a])
        # The status says whether a slow link was found, and the findings say which.
        self.assertEqual(p.returncode, 1 if report["slow_links"] else 0, p.stdout + p.stderr)
        self.assertEqual(bool(report["findings"]), bool(report["slow_links"]))
        self.assertIn("same-host links: %d" % (n * (n - 1) // 2), p.stdout)
        return p, report

    def test_launch_over_tcp_measures_every_pair(self):
        def launch(*args):
            return run([BIN, "launch", "--nproc-per-node", "4", "--", "bench", "--links",
                        "--link-size", "1MiB", "--iters", "5", *args], env=clean_env(), timeout=120)
        p, report = self.links(launch, n=4)
        self.assertEqual(report["backend"], "host/tcp")
        # 4 ranks on fewer than 4 CPUs: auto measures one pair at a time, and says why.
        cpus = os.cpu_count()
        self.assertEqual(report["schedule"], "serial" if cpus < 4 else "rounds")
        if cpus < 4:
            self.assertIn("ranks on %d CPUs" % cpus, p.stdout)

    def test_mpirun_odd_world_rests_one_rank_per_round(self):
        def mpi(*args):
            return mpirun(3, "bench", "--links", "-e", "256K", "--iters", "5",
                          "--link-schedule", "rounds", *args)
        p, report = self.links(mpi, n=3)
        self.assertEqual(report["backend"], "host/mpi")
        # -e is the link size, read as nccl-tests reads it (K = 1024).
        self.assertEqual(report["bytes"], 256 * 1024)
        self.assertEqual(report["schedule"], "rounds")
        self.assertIn("the pairs of a round at once", p.stdout)

    def test_sweep_flags_are_refused_not_ignored(self):
        for args, named in [(["-b", "1M"], "-b"), (["-f", "2"], "-f"), (["-d", "half"], "-d"),
                            (["all_gather"], "OP"), (["-e", "1M", "--link-size", "2M"], "disagree"),
                            (["-e", "8G"], "4 GiB")]:
            p = run([BIN, "bench", "--links", *args], env=clean_env())
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertIn(named, p.stderr, args)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_link_flags_without_links_are_refused(self):
        for args in (["--link-size", "1M"], ["--link-schedule", "serial"]):
            p = run([BIN, "bench", *args], env=clean_env())
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertIn(args[0] + " applies to --links only", p.stderr)

    def test_bad_schedule_is_a_usage_error(self):
        p = run([BIN, "bench", "--links", "--link-schedule", "sometimes"], env=clean_env())
        self.assertEqual(p.returncode, 2)
        self.assertIn("--link-schedule", p.stderr)


class FaultsDuringTheLinkTest(unittest.TestCase):
    """A rank lost while pairs are being measured is named by every other rank."""
    TIMEOUT = 4  # a pair measures for about a second (--timeout / 4)

    def start(self, spec, grace=3):
        """Four ranks into the link test; rank 3 raises the signal of `spec`
        on itself as it enters the links phase (GPUDIAG_TEST_RAISE): an event,
        not a guess at how long the check before it takes."""
        env = dict(clean_env(), **raise_at(spec))
        self.proc = subprocess.Popen(
            [BIN, "launch", "--nproc-per-node", "4", "--grace", str(grace), "--", "bench", "--links",
             "--link-size", "64MiB", "--iters", "100", "--timeout", str(self.TIMEOUT)],
            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: self.proc.poll() is None and (self.proc.kill(), self.proc.communicate()))

    def rank3_pid(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            kids = children_by_rank(self.proc.pid)
            if 3 in kids:
                return kids[3]
            time.sleep(0.1)
        self.fail("launcher did not start rank 3")

    def broken(self, out):
        return broken_lines(strip_prefix(out))

    def test_rank_killed_is_named_at_once(self):
        self.start("SIGKILL@links:3", grace=8)  # time for the survivors to meet and report
        t0 = time.monotonic()
        out, err = self.proc.communicate(timeout=60)
        self.assertLess(time.monotonic() - t0, 12, out + err)
        self.assertEqual(self.proc.returncode, 137, err)
        broken = self.broken(out)
        self.assertEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertIn("rank 3 [", m["reason"])
            self.assertIn("killed by SIGKILL", m["reason"])

    def test_rank_stopped_is_named_within_three_timeouts(self):
        self.start("SIGSTOP@links:3")
        pid = self.rank3_pid()
        self.addCleanup(resume, pid)
        wait_stopped(pid)
        t0 = time.monotonic()
        out, err = self.proc.communicate(timeout=60)
        # 3x --timeout for a turn, then the launcher's grace (3 s) and its SIGTERM.
        self.assertLess(time.monotonic() - t0, 3 * self.TIMEOUT + 3 + 8, out + err)
        self.assertNotEqual(self.proc.returncode, 0)
        broken = self.broken(out)
        self.assertGreaterEqual(len(broken), 3, out + err)
        for m in broken:
            self.assertIn("rank 3 [", m["reason"])


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class SlowHostOnASwitch(unittest.TestCase):
    """Three hosts of two ranks on one bridge; host 3's link limited to 200 Mbit/s."""
    PREFIX = "gls"

    def setUp(self):
        star(self, self.PREFIX, 3, timeout=30)
        p = run([NETNS, "throttle", self.PREFIX, "3", "200mbit"], timeout=30)
        if p.returncode != 0:
            self.skipTest("tc tbf (sch_tbf) is not available here: " + p.stderr.strip())

    def on_hosts(self, port, command):
        """`gpudiag launch` of 2 ranks on each host, node1 the master: each
        launcher's (returncode, stdout, stderr)."""
        procs = []
        for i in (1, 2, 3):
            inner = (f"hostname node{i}; exec {BIN} launch --nnodes 3 --node-rank {i - 1} "
                     f"--nproc-per-node 2 --master-addr 10.78.0.1 --master-port {port} -- {command}")
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", f"{self.PREFIX}-{i}", "unshare", "--uts", "sh", "-c", inner],
                env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=120)
                outs.append((p.returncode, out, err))
            finally:
                p.kill()
        return outs

    def test_the_throttled_host_is_named(self):
        outs = self.on_hosts(29720, "bench --links --link-size 1MiB --iters 3 --timeout 30 "
                                    "--link-schedule serial")
        out = strip_prefix(outs[0][1])
        self.assertEqual(outs[0][0], 1, out + outs[0][2])
        self.assertIn("6 ranks on 3 hosts", out)
        self.assertIn("host node3: all 8 links to other hosts are slow", out)
        # The measured rate is the configured one: 200 Mbit/s = 0.025 GB/s each way.
        rows = matrix_rows(outs[0][1])
        for r in (4, 5):
            for peer in (0, 1, 2, 3):
                self.assertLess(float(rows[r][peer]), 0.05, out)
                self.assertGreater(float(rows[r][peer]), 0.01, out)
        # The host matrix: node3's row is slow to both others, node1-node2 is not.
        hosts = matrix_rows(outs[0][1], by_host=True)
        self.assertEqual(sorted(hosts), [0, 1, 2], out)
        self.assertLess(float(hosts[2][0]), 0.05, out)
        self.assertLess(float(hosts[2][1]), 0.05, out)
        self.assertGreater(float(hosts[0][1]), 0.1, out)
        # No other host is blamed.
        self.assertNotIn("host node1:", out)
        self.assertNotIn("host node2:", out)

    def test_check_blames_no_rank_for_the_slow_link_and_no_host_for_its_own_nic(self):
        # A plain check over the same hosts: every rank is OK; the all-reduce's
        # figure is the slow link's, which a collective cannot place, so no
        # rank is named for it; each host's own veth end is not drift.
        outs = self.on_hosts(29722, "check --size 1MiB --iters 2 --timeout 30")
        out = strip_prefix(outs[0][1])
        self.assertEqual(outs[0][0], 0, out + outs[0][2])
        self.assertIn("summary: 6/6 ranks OK on 3 hosts", out)
        self.assertNotIn("slowest: rank", out)
        self.assertIn("cannot say which link; gpudiag bench --links names it", out)
        self.assertNotIn("drift:", out)
        self.assertNotIn(".mtu differs", out)
        self.assertNotIn("RDMA", out)  # none here: no port, memlock or count finding


if __name__ == "__main__":
    unittest.main()
