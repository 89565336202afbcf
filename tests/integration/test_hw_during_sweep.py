"""What the hardware did while a sweep ran: `gpudiag sweep` reads each node's
evidence again after its last round (the rank that read it before the rounds
does) and a node whose physical NIC's carrier_changes, InfiniBand link_downed
or PCIe AER counts moved in between is FAILED with the change quoted in its
row and written to the exclude list; counters that are high but still, a
veth's carrier and corrected errors fail nothing. Nothing waits with a sleep:
each rank stops itself as it enters the sweep's `hardware` stage
(GPUDIAG_TEST_RAISE=SIGSTOP@hardware), after the judge's last round line; the
test waits for both to stop (a pool of one node runs no pair rounds: the
judge plans none), moves the counters of a sysfs-shaped tree
(GPUDIAG_TEST_SYSFS_ROOT, for tests only) and resumes them. Through node
leaders on three nodes (network namespaces), a healthy node that neither
judges nor failed ends with rank 0's count too: it reads it from rank 0's
record at one more checkpoint."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import BIN, clean_env, resume, strip_prefix, wait_stopped
from netns_nodes import star
from test_hw_during_check import rank_pids, sysfs_tree, write


class StoppedAtTheSweepsEnd(unittest.TestCase):
    """`launch --nproc-per-node 2 -- sweep --backend host` over a tree whose
    counters `change()` moves while both ranks are stopped."""

    def sweep(self, change, env_extra=None):
        root = sysfs_tree()
        self.addCleanup(shutil.rmtree, root)
        d = tempfile.mkdtemp(prefix="gpudiag-hwsweep-")
        self.addCleanup(shutil.rmtree, d)
        exclude, report = os.path.join(d, "exclude"), os.path.join(d, "sweep.json")
        env = dict(clean_env(), GPUDIAG_TEST_RAISE="SIGSTOP@hardware", GPUDIAG_TEST_SYSFS_ROOT=root, **(env_extra or {}))
        p = subprocess.Popen([BIN, "launch", "--nproc-per-node", "2", "--", "sweep", "--backend", "host",
                              "--timeout", "60", "--exclude-file", exclude, "--json", report],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
        ranks = []
        try:
            ranks = rank_pids(p.pid, 2)
            for pid in ranks:
                wait_stopped(pid)
            change(root)
            for pid in ranks:
                os.kill(pid, signal.SIGCONT)
            out, err = p.communicate(timeout=120)
        finally:
            for pid in ranks:
                resume(pid)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
        with open(exclude) as f:
            excluded = f.read()
        with open(report) as f:
            doc = json.load(f)
        return p.returncode, strip_prefix(out), err, excluded, doc

    def assert_node_failed(self, rc, out, err, excluded, doc, line):
        self.assertEqual(rc, 1, out + err)
        rows = [l for l in out.splitlines() if " FAILED " in l]
        self.assertEqual(len(rows), 1, out)
        self.assertRegex(rows[0], r"FAILED +its hardware during the sweep: " + line + "$")
        host = rows[0].split("]: ", 1)[-1].split()[0]
        self.assertEqual(excluded.strip(), host, out)
        self.assertIn("1 node to exclude", err)
        failed = [n for n in doc["nodes"] if n["state"] != "OK"]
        self.assertEqual(len(failed), 1, doc)
        self.assertRegex(failed[0]["reason"], "^its hardware during the sweep: " + line + "$")

    def test_a_physical_nics_carrier_change_fails_the_node(self):
        rc, out, err, excluded, doc = self.sweep(lambda root: write(f"{root}/sys/class/net/eth0/carrier_changes", "9"))
        self.assert_node_failed(rc, out, err, excluded, doc, re.escape(
            "network link flapped on eth0 (carrier_changes 7 -> 9): check the cable"))

    def test_under_node_leaders_too(self):
        # GPUDIAG_TREE=on: rank 0 reads every rank's line at the last checkpoint itself.
        rc, out, err, excluded, doc = self.sweep(lambda root: write(f"{root}/sys/class/net/eth0/carrier_changes", "8"),
                                                 {"GPUDIAG_TREE": "on", "GPUDIAG_SECRET": "s" * 32})
        self.assert_node_failed(rc, out, err, excluded, doc, re.escape(
            "network link flapped on eth0 (carrier_changes 7 -> 8): check the cable"))

    def test_infiniband_and_aer_counters_that_move_fail_the_node(self):
        def change(root):
            write(f"{root}/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed", "3")
            write(f"{root}/sys/devices/pci0000:00/0000:3b:00.0/aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 5")

        rc, out, err, excluded, doc = self.sweep(change)
        self.assert_node_failed(rc, out, err, excluded, doc, re.escape(
            "InfiniBand link_downed grew on mlx5_0/1 (link_downed 2 -> 3): check the cable (+1 more hardware "
            "finding: gpudiag info lists them)"))

    def test_high_but_still_counters_and_virtual_links_fail_nothing(self):
        def change(root):  # a veth's carrier and corrected errors move; eth0's 7 and link_downed's 2 stay
            write(f"{root}/sys/class/net/veth1/carrier_changes", "30")
            write(f"{root}/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "41")
            write(f"{root}/sys/devices/pci0000:00/0000:3b:00.0/aer_dev_correctable", "TOTAL_ERR_COR 121")

        rc, out, err, excluded, doc = self.sweep(change)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("no node to exclude", out)
        self.assertEqual(excluded.strip(), "")
        self.assertNotIn("FAILED", out)


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class EveryNodeEndsWithRankZerosCount(unittest.TestCase):
    """node1..node3 (two ranks each, GPUDIAG_TREE=on, groups of two nodes)
    swept; node3's ranks stop at the hardware stage while its eth0 flaps."""
    PREFIX = "ghw"

    def setUp(self):
        star(self, self.PREFIX, 3)

    def test_a_healthy_nodes_ranks_exit_as_rank_0_does(self):
        d = tempfile.mkdtemp(prefix="gpudiag-hwsweep-")
        self.addCleanup(shutil.rmtree, d)
        exclude = os.path.join(d, "exclude")
        procs, roots = {}, {}
        for i in (1, 2, 3):
            roots[i] = sysfs_tree()
            self.addCleanup(shutil.rmtree, roots[i])
            env = dict(clean_env(), GPUDIAG_SECRET="s" * 32, GPUDIAG_TREE="on", GPUDIAG_TREE_GROUP_NODES="2",
                       GPUDIAG_TEST_SYSFS_ROOT=roots[i])
            if i == 3:
                env["GPUDIAG_TEST_RAISE"] = "SIGSTOP@hardware"
            line = (f"hostname node{i}; exec {BIN} launch --nnodes 3 --node-rank {i - 1} --nproc-per-node 2 "
                    f"--master-addr 10.78.0.1 --master-port 29790 -- sweep --backend host --timeout 60 "
                    f"--pair-timeout 10 --exclude-file {exclude}")
            procs[i] = subprocess.Popen(["ip", "netns", "exec", f"{self.PREFIX}-{i}", "unshare", "--uts", "sh",
                                         "-c", line], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, start_new_session=True)
        ranks, outs = [], {}
        try:
            ranks = rank_pids(procs[3].pid, 2)  # node3's, stopped at the hardware stage
            write(f"{roots[3]}/sys/class/net/eth0/carrier_changes", "9")
            for pid in ranks:
                os.kill(pid, signal.SIGCONT)
            for i, p in procs.items():
                out, err = p.communicate(timeout=180)
                outs[i] = (p.returncode, strip_prefix(out), err)
        finally:
            for pid in ranks:
                resume(pid)
            for p in procs.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.communicate()
        rc, out, err = outs[1]
        self.assertEqual(rc, 1, out + err[-3000:])
        self.assertRegex(out, r"node3 .*FAILED +its hardware during the sweep: network link flapped on eth0 "
                              r"\(carrier_changes 7 -> 9\)")
        with open(exclude) as f:
            self.assertEqual(f.read(), "node3\n")
        for i in (2, 3):  # node2 is healthy, and knows of node3 only from rank 0
            rc, out, err = outs[i]
            self.assertEqual(rc, 1, (i, out, err[-3000:]))
            self.assertRegex(out, r"^sweep: 1 node to exclude", (i, out, err[-3000:]))


if __name__ == "__main__":
    unittest.main()
