"""The job-wide fingerprint (issue 16) on real processes started by hand on
loopback: ranks 2-3 export a different NCCL_SOCKET_IFNAME and can load a
libnccl-net.so (a tiny library built here with cc, on their LD_LIBRARY_PATH
only) that ranks 0-1 cannot. The report names both differences with the two
groups of ranks; the plugin difference stops every rank at the exchange,
non-zero, well within the timeout. A clean job shows no difference, and
`gpudiag info --json` shows one rank's fingerprint."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from harness import (BIN, SOURCE_DIR, Ranks, broken_lines, clean_env, free_port, ok_lines,
                     rank_env, run, strip_prefix)
from test_two_hosts import node_cmd

NETNS = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")
PREFIX = "gdf"

ARGS = ["check", "--backend", "host", "--size", "1MiB", "--mem", "1MiB", "--iters", "1",
        "--timeout", "60"]
HOST = socket.gethostname().split(".")[0]


def build_plugin(folder):
    """A shared library named like NCCL's net plugin; nothing in it is called."""
    if shutil.which("cc") is None:
        raise unittest.SkipTest("cc is not installed")
    src = os.path.join(folder, "plugin.c")
    with open(src, "w") as f:
        f.write("int gpudiag_test_net_plugin = 1;\n")
    lib = os.path.join(folder, "libnccl-net.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src], check=True, timeout=60)
    return lib


class Fingerprint(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpudiag-fp-")
        self.ranks = None
        # Only a plugin the test builds may be found: none is installed here.
        probe = run([BIN, "info", "--json", "-"], env=self.env(), timeout=60)
        found = json.loads(probe.stdout)["fingerprint"].get("plugin.net")
        if found != "not found":
            raise unittest.SkipTest(f"this machine has a libnccl-net.so already: {found}")

    def tearDown(self):
        if self.ranks:
            self.ranks.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, extra=None):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("NCCL_", "GPUDIAG_", "OMPI_", "PMIX", "SLURM_"))}
        e.update(extra or {})
        return e

    def start(self, extra, args=ARGS):
        port = free_port()
        envs = []
        for r in range(4):
            e = rank_env(r, 4, port, extra=extra.get(r))
            for k in [k for k in e if k.startswith("NCCL_") and k not in (extra.get(r) or {})]:
                del e[k]  # the variables under test are the only NCCL_* ones
            envs.append(e)
        self.ranks = Ranks(envs, args)
        took = self.ranks.wait(90)
        return took

    def test_plugin_and_ifname_on_half_the_ranks(self):
        plugin_dir = os.path.join(self.tmp, "plugin")
        os.mkdir(plugin_dir)
        lib = build_plugin(plugin_dir)
        ld = os.pathsep.join(p for p in [plugin_dir, os.environ.get("LD_LIBRARY_PATH", "")] if p)
        low = {"NCCL_SOCKET_IFNAME": "eth0"}
        high = {"NCCL_SOCKET_IFNAME": "lo", "LD_LIBRARY_PATH": ld}
        report = os.path.join(self.tmp, "report.json")
        took = self.start({0: low, 1: low, 2: high, 3: high}, args=ARGS + ["--json", report])
        self.assertLess(took, 60, "the exchange should stop the job at once")
        self.assertTrue(all(c not in (0, None) for c in self.ranks.codes), self.ranks.codes)
        out = self.ranks.stdout()
        self.assertEqual(ok_lines(out), [], out)
        plugin_groups = f"ranks 0-1 [{HOST}]: not found; ranks 2-3 [{HOST}]: {lib}"
        broken = broken_lines(out)
        self.assertEqual(len(broken), 4, out)
        for m in broken:  # every rank says why, naming both groups
            self.assertIn("the NCCL net plugin differs between ranks", m["reason"])
            self.assertIn(plugin_groups, m["reason"])
        self.assertIn(f"BROKEN: the NCCL net plugin differs between ranks: {plugin_groups}", out)
        self.assertIn(f"warning: NCCL_SOCKET_IFNAME differs between ranks: ranks 0-1 [{HOST}]: "
                      f"NCCL_SOCKET_IFNAME=eth0; ranks 2-3 [{HOST}]: NCCL_SOCKET_IFNAME=lo", out)
        with open(report) as f:
            doc = json.load(f)
        fields = {d["field"]: d for d in doc["fingerprint"]["differences"]}
        self.assertEqual(fields["plugin.net"]["severity"], "broken")
        self.assertEqual([(g["ranks"], g["value"]) for g in fields["plugin.net"]["groups"]],
                         [("0-1", "not found"), ("2-3", lib)])
        self.assertEqual(fields["env.NCCL_SOCKET_IFNAME"]["severity"], "warning")
        self.assertFalse(doc["ok"])

    def test_clean_job_shows_no_difference(self):
        same = {"NCCL_SOCKET_IFNAME": "eth0"}
        report = os.path.join(self.tmp, "report.json")
        self.start({r: same for r in range(4)}, args=ARGS + ["--json", report])
        self.assertEqual(self.ranks.codes, [0, 0, 0, 0], self.ranks.err)
        out = self.ranks.stdout()
        self.assertNotIn("differ", out)
        self.assertIn("fields agree on all 4 ranks", out)
        with open(report) as f:
            doc = json.load(f)
        self.assertEqual(doc["fingerprint"]["differences"], [])
        self.assertEqual(doc["fingerprint"]["ranks_compared"], 4)

    def test_a_rank_with_hundreds_of_long_variables_is_bounded(self):
        # Rank 3 exports 400 long NCCL_* variables: the others do not. Its
        # record stays small (128 variables kept, each cut), the job passes,
        # and the report names a few differences and counts the rest.
        many = {f"NCCL_TEST_V{i:03d}": "x" * 5000 for i in range(400)}
        report = os.path.join(self.tmp, "report.json")
        self.start({3: many}, args=ARGS + ["--json", report])
        self.assertEqual(self.ranks.codes, [0, 0, 0, 0], self.ranks.err)
        out = self.ranks.stdout()
        self.assertIn("warning: NCCL_TEST_V000 differs between ranks: ranks 0-2 "
                      f"[{HOST}]: unset; rank 3 [{HOST}]: NCCL_TEST_V000=xxx", out)
        self.assertIn("more differences in --json", out)
        with open(report) as f:
            doc = json.load(f)
        fp = doc["fingerprint"]
        # At most 128 variables travel (the test's own CUDA_* ones among them).
        self.assertIn(len(fp["differences"]) + fp["more_differences"], range(120, 129))
        self.assertLess(len(json.dumps(fp)), 24 << 10)

    def test_info_json_shows_this_ranks_fingerprint(self):
        plugin_dir = os.path.join(self.tmp, "plugin")
        os.mkdir(plugin_dir)
        lib = build_plugin(plugin_dir)
        r = run([BIN, "info", "--json", "-"],
                env=self.env({"LD_LIBRARY_PATH": plugin_dir, "NCCL_IB_DISABLE": "1"}), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        fp = json.loads(r.stdout)["fingerprint"]
        self.assertEqual(fp["plugin.net"], lib)
        self.assertEqual(fp["env.NCCL_IB_DISABLE"], "1")
        self.assertEqual(fp["kernel"], os.uname().release)
        self.assertEqual(fp["host"], HOST)
        st = os.statvfs("/dev/shm")
        self.assertEqual(int(fp["shm"]), st.f_blocks * st.f_frsize)


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class FingerprintTwoHosts(unittest.TestCase):
    """The same on two network-namespace hosts, each running `gpudiag launch`:
    node-b's ranks find the plugin and export NCCL_SOCKET_IFNAME=lo."""

    def setUp(self):
        p = run([NETNS, "up", PREFIX], timeout=30)
        if p.returncode != 0:
            self.skipTest("cannot create network namespaces here: " + p.stderr.strip())
        self.tmp = tempfile.mkdtemp(prefix="gpudiag-fp-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        run([NETNS, "down", PREFIX], timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, ns, hostname, node_rank, port, extra):
        env = {k: v for k, v in clean_env().items() if not k.startswith("NCCL_")}
        env.update(extra)
        cmd = node_cmd(ns, hostname, node_rank, port, "--backend", "host", "--size", "1MiB",
                       "--mem", "1MiB", "--iters", "1", timeout=60)
        cmd[3] = f"{PREFIX}-{ns}"  # node_cmd names test_two_hosts' namespaces
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.procs.append(p)
        return p

    def test_plugin_on_one_host_only(self):
        lib = build_plugin(self.tmp)
        port = 29640
        a = self.start("a", "node-a", 0, port, {"NCCL_SOCKET_IFNAME": "eth0"})
        b = self.start("b", "node-b", 1, port, {"NCCL_SOCKET_IFNAME": "lo",
                                                "LD_LIBRARY_PATH": self.tmp})
        out_b, err_b = b.communicate(timeout=90)
        out_a, err_a = a.communicate(timeout=90)
        self.assertNotEqual(a.returncode, 0)
        self.assertNotEqual(b.returncode, 0)
        out = strip_prefix(out_a + out_b)
        broken = broken_lines(out)
        self.assertEqual(len(broken), 4, out + err_a + err_b)
        groups = f"ranks 0-1 [node-a]: not found; ranks 2-3 [node-b]: {lib}"
        for m in broken:
            self.assertIn(groups, m["reason"])
        self.assertIn("NCCL_SOCKET_IFNAME differs between ranks: ranks 0-1 [node-a]: "
                      "NCCL_SOCKET_IFNAME=eth0; ranks 2-3 [node-b]: NCCL_SOCKET_IFNAME=lo", out)
        # Across two hosts, lo is wrong on its own too.
        self.assertIn("fingerprint finding: NCCL_SOCKET_IFNAME=lo names a loopback interface "
                      "in a job across 2 hosts (ranks 2-3 [node-b])", out)


if __name__ == "__main__":
    unittest.main()
