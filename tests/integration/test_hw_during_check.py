"""What the hardware did while a check ran: `gpudiag check` reads the node's
evidence a second time at its end (its `hardware` phase, before the barrier)
and fails every rank of a node whose physical links flapped or whose error
counters moved in between, with the evidence and its action, and rank 0's
summary names it. Nothing here waits for a moment with a sleep: every rank
stops itself as it enters the `hardware` phase (GPUDIAG_TEST_RAISE=
SIGSTOP@hardware), the test waits for both to show state 'T', changes the
input, and resumes them.

Inputs: a sysfs-shaped tree (GPUDIAG_TEST_SYSFS_ROOT, for tests only) with a
physical NIC, a veth, an InfiniBand port and a GPU's AER counters, whose
counters the test moves; a kernel log in /dev/kmsg's format bind-mounted over
/dev/kmsg (as test_hw_evidence does) that the test appends a NIC's link-down
line to; and a real veth pair in a network namespace taken down and up, which
is not a physical NIC and must never fail a node."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import (BIN, Ranks, clean_env, descendants, free_port, process_state, rank_env, resume, strip_prefix,
                     wait_stopped)
from test_hw_evidence import INFORMATIONAL, NAMESPACE_PROBLEM, kmsg_file


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def sysfs_tree():
    """A node's sysfs, as the readers see it: eth0 with a device link (a
    physical NIC), veth1 without one, mlx5_0 port 1, a GPU with AER files."""
    root = tempfile.mkdtemp(prefix="gpudiag-sysfs-")
    pci = os.path.join(root, "sys/devices/pci0000:00")
    gpu, nic = os.path.join(pci, "0000:3b:00.0"), os.path.join(pci, "0000:01:00.0")
    write(f"{gpu}/class", "0x030200")
    write(f"{gpu}/vendor", "0x10de")
    for name, text in (("aer_dev_fatal", "TOTAL_ERR_FATAL 0"), ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 4"),
                       ("aer_dev_correctable", "TOTAL_ERR_COR 120")):
        write(f"{gpu}/{name}", text)
    write(f"{nic}/class", "0x020000")
    os.makedirs(os.path.join(root, "sys/bus/pci/devices"))
    for d in (gpu, nic):
        os.symlink(d, os.path.join(root, "sys/bus/pci/devices", os.path.basename(d)))
    eth0 = os.path.join(root, "sys/class/net/eth0")
    write(f"{eth0}/operstate", "up")
    write(f"{eth0}/carrier_changes", "7")  # high since boot: never judged by its value
    os.symlink(nic, f"{eth0}/device")
    write(os.path.join(root, "sys/class/net/veth1/carrier_changes"), "3")
    port = os.path.join(root, "sys/class/infiniband/mlx5_0/ports/1")
    write(f"{port}/state", "4: ACTIVE")
    for name, value in (("link_downed", 2), ("symbol_error", 40), ("link_error_recovery", 0)):
        write(f"{port}/counters/{name}", str(value))
    return root


def rank_pids(root_pid, n, timeout=120):
    """The pids of the `n` ranks under `root_pid` once each has stopped itself."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stopped = [int(l.split()[0]) for l in descendants(root_pid)[1:]]
        stopped = [p for p in stopped if process_state(p) == "T"]
        if len(stopped) >= n:
            return stopped[:n]
        time.sleep(0.05)
    raise AssertionError(f"{n} ranks did not stop at the hardware phase: {descendants(root_pid)}")


class StoppedAtHardware(unittest.TestCase):
    """`launch --nproc-per-node 2 -- check --backend host`, its ranks stopped
    at the hardware phase while `change()` runs."""

    def check(self, change, env_extra=None, prefix=(), nproc=2):
        env = clean_env()
        env["GPUDIAG_TEST_RAISE"] = "SIGSTOP@hardware"
        env.update(env_extra or {})
        cmd = [*prefix, BIN, "launch", "--nproc-per-node", str(nproc), "--", "check", "--backend", "host"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
        ranks = []
        try:
            ranks = rank_pids(p.pid, nproc)
            for pid in ranks:
                wait_stopped(pid)
            change()
            for pid in ranks:
                os.kill(pid, signal.SIGCONT)
            out, err = p.communicate(timeout=120)
        finally:
            for pid in ranks:
                resume(pid)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
        return p.returncode, strip_prefix(out), err

    def assert_node_broken(self, rc, out, err, line, nproc=2):
        self.assertEqual(rc, 1, out + err)
        broken = [l for l in out.splitlines() if " is broken: " in l]
        self.assertEqual(len(broken), nproc, out)
        for l in broken:
            self.assertRegex(l, r"^\[[^\]]+-\d\] is broken: " + line + "$")
        summary = [l for l in out.splitlines() if l.startswith("summary: ")]
        self.assertEqual(len(summary), 1, out)
        ranks = "0,1" if nproc == 2 else f"0-{nproc - 1}"
        self.assertRegex(summary[0], rf"; ranks {ranks} broken in hardware \(node [^:]+: " + line + r"\)$")


class DuringTheCheck(StoppedAtHardware):

    def test_a_physical_nics_carrier_change_fails_the_node(self):
        root = sysfs_tree()
        self.addCleanup(shutil.rmtree, root)
        rc, out, err = self.check(lambda: write(f"{root}/sys/class/net/eth0/carrier_changes", "9"),
                                  {"GPUDIAG_TEST_SYSFS_ROOT": root})
        self.assert_node_broken(rc, out, err, re.escape("network link flapped on eth0: check the cable"))

    def test_infiniband_and_aer_counters_that_move_fail_the_node(self):
        root = sysfs_tree()
        self.addCleanup(shutil.rmtree, root)

        def change():
            write(f"{root}/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed", "3")
            write(f"{root}/sys/devices/pci0000:00/0000:3b:00.0/aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 5")

        rc, out, err = self.check(change, {"GPUDIAG_TEST_SYSFS_ROOT": root})
        self.assert_node_broken(rc, out, err, re.escape(
            "InfiniBand link_downed grew on mlx5_0/1: check the cable (+1 more hardware finding: "
            "gpudiag info lists them)"))

    def test_healthy_counters_and_virtual_links_fail_nothing(self):
        root = sysfs_tree()
        self.addCleanup(shutil.rmtree, root)

        def change():  # a veth's carrier and corrected errors move; nothing that fails a node
            write(f"{root}/sys/class/net/veth1/carrier_changes", "30")
            write(f"{root}/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "41")
            write(f"{root}/sys/devices/pci0000:00/0000:3b:00.0/aer_dev_correctable", "TOTAL_ERR_COR 121")

        rc, out, err = self.check(change, {"GPUDIAG_TEST_SYSFS_ROOT": root})
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(len(re.findall(r"\] is OK \(global rank", out)), 2, out)

    @unittest.skipIf(NAMESPACE_PROBLEM, NAMESPACE_PROBLEM)
    def test_a_link_down_line_logged_during_the_check_fails_the_node(self):
        path = kmsg_file(INFORMATIONAL)
        self.addCleanup(os.unlink, path)

        def change():
            usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)  # the kernel log's clock
            with open(path, "a") as f:
                f.write(f"6,900,{usec},-;mlx5_core 0000:3b:00.0 ens1f0np0: Link down\n")
                f.write(f"6,901,{usec + 1},-;veth9c1d: Link is Down\n")  # virtual: no finding

        rc, out, err = self.check(change, prefix=("unshare", "-m", "sh", "-c",
                                                  'mount --bind "$0" /dev/kmsg && exec "$@"', path))
        self.assert_node_broken(rc, out, err, r"network link down on ens1f0np0 at \d\d:\d\d:\d\d: check the cable")


class ReadOncePerNode(StoppedAtHardware):
    """A node's ranks read its kernel log and sysfs once, at each end of the
    check: one rank reads and the others take its verdict through the store,
    and every rank still says the node is broken."""

    def test_three_ranks_read_the_node_once_at_each_end(self):
        root = sysfs_tree()
        self.addCleanup(shutil.rmtree, root)
        rc, out, err = self.check(lambda: write(f"{root}/sys/class/net/eth0/carrier_changes", "9"),
                                  {"GPUDIAG_TEST_SYSFS_ROOT": root, "GPUDIAG_LOG_LEVEL": "debug"}, nproc=3)
        self.assert_node_broken(rc, out, err, re.escape("network link flapped on eth0: check the cable"), nproc=3)
        for end in ("check-start", "check-end"):
            read = re.findall(rf"rank (\d) read the node's hardware evidence \(hw/{end}/", err)
            took = re.findall(rf"rank (\d) took the node's hardware evidence \(hw/{end}/", err)
            self.assertEqual(len(read), 1, err)
            self.assertEqual(sorted(read + took), ["0", "1", "2"], err)
        # The end is read by the rank that read the start (its counters are the ones compared).
        self.assertEqual(re.findall(r"rank (\d) read the node's hardware evidence \(hw/check-start/", err),
                         re.findall(r"rank (\d) read the node's hardware evidence \(hw/check-end/", err), err)


class OneNodesHardwareStopsTheOthers(unittest.TestCase):
    """Two ranks started by hand as two nodes would be: only rank 1 reads the
    tree whose NIC flaps. Rank 1 is broken by it; rank 0, whose node is
    healthy, leaves the final barrier stopped by rank 1, and rank 0's summary
    and both status lines agree."""

    def test_the_healthy_rank_is_stopped_by_the_broken_one(self):
        root = sysfs_tree()
        self.addCleanup(shutil.rmtree, root)
        port = free_port()
        envs = [rank_env(0, 2, port),
                rank_env(1, 2, port, extra={"GPUDIAG_TEST_SYSFS_ROOT": root, "GPUDIAG_TEST_RAISE": "SIGSTOP@hardware:1"})]
        ranks = Ranks(envs, ["check", "--backend", "host", "--timeout", "60"])
        try:
            wait_stopped(ranks.procs[1].pid)
            write(f"{root}/sys/class/net/eth0/carrier_changes", "9")
            os.kill(ranks.procs[1].pid, signal.SIGCONT)
            ranks.wait(120)
        finally:
            resume(ranks.procs[1].pid)
            ranks.kill()
        out = ranks.stdout()
        self.assertEqual(ranks.codes, [1, 1], out)
        self.assertRegex(out, r"\[[^\]]+-1\] is broken: network link flapped on eth0: check the cable\n")
        self.assertRegex(out, r"\[[^\]]+-0\] is broken: .*rank 1 \[[^\]]+\] failed in hardware: network link flapped")
        self.assertRegex(out, r"summary: 0/2 ranks OK.*; rank 1 broken in hardware \(node [^:]+: network link flapped on "
                              r"eth0: check the cable\); rank 0 stopped by rank 1\n")


def netns_problem():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "needs root and ip(8) for a network namespace"
    return ""


@unittest.skipIf(netns_problem(), netns_problem())
class AVethInANetworkNamespace(StoppedAtHardware):
    """The real kernel's veth and the real kernel log: the veth's
    carrier_changes moves when its peer is taken down and up during the
    check, and no node fails for it."""

    def test_a_veth_taken_down_and_up_fails_nothing(self):
        ns = f"gdhw{os.getpid()}"
        ip = lambda *a: subprocess.run(["ip", "-n", ns, *a], check=True, capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=30)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", ns], capture_output=True, timeout=30)
        ip("link", "set", "lo", "up")
        ip("link", "add", "gdhwa", "type", "veth", "peer", "name", "gdhwb")
        ip("link", "set", "gdhwa", "up")
        ip("link", "set", "gdhwb", "up")

        def carrier_changes():
            r = subprocess.run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/gdhwa/carrier_changes"],
                               capture_output=True, text=True, timeout=30, check=True)
            return int(r.stdout)

        moved = []

        def change():
            before = carrier_changes()
            ip("link", "set", "gdhwb", "down")
            ip("link", "set", "gdhwb", "up")
            moved.append(carrier_changes() - before)

        rc, out, err = self.check(change, prefix=("ip", "netns", "exec", ns))
        self.assertGreaterEqual(moved[0], 1, "the veth's carrier did not change")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(len(re.findall(r"\] is OK \(global rank", out)), 2, out)


if __name__ == "__main__":
    unittest.main()
