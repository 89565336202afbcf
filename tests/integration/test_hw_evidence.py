"""Hardware evidence from the kernel log, end to end: a file in /dev/kmsg's
record format (PRI,SEQ,USEC,FLAGS;MESSAGE), written from the shapes the NVIDIA
driver, the PCIe AER driver, EDAC and NIC drivers print, is bind-mounted over
/dev/kmsg in a private mount namespace (`unshare -m`), and the real gpudiag
reads it as it reads the device: `gpudiag info` lists the findings with their
actions, and under `gpudiag launch -- check` every rank of a node whose log
shows an Xid 79 says `is broken: Xid 79 ...: reboot the node` (exit status 1),
while workload Xids and a link flap logged before the job fail nothing. The
machine's own untouched kernel log must make no node unfit."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import BIN, clean_env, run, strip_prefix

XID79_LINE = re.compile(r"Xid 79 \(GPU fallen off the bus\) on 0000:3b:00 at \d\d:\d\d:\d\d: reboot the node")


def kmsg_file(records):
    """A temporary file of kernel records: (seconds since boot, level, message)."""
    f = tempfile.NamedTemporaryFile("w", prefix="gpudiag-kmsg-", suffix=".txt", delete=False)
    for seq, (sec, level, message) in enumerate(records):
        f.write(f"{level},{seq},{int(sec * 1e6)},-;{message}\n")
        if "Xid" in message:  # the device's dictionary lines come with some records
            f.write(" SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n")
    f.close()
    return f.name


INFORMATIONAL = [
    (0.0, 5, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-115) (x86_64-linux-gnu-gcc-13)"),
    (1.2, 6, "EDAC MC: Ver: 3.0.0"),
    (1.3, 6, "mce: CPU0: Thermal monitoring enabled (TM1)"),
    (1.4, 6, "pcieport 0000:00:01.0: AER: enabled with IRQ 121"),
    (4.0, 6, "nvidia-nvlink: Nvlink Core is being initialized, major device number 511"),
    (4.1, 6, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.127.05"),
    (9.0, 6, "ixgbe 0000:01:00.0 eth0: NIC Link is Down"),  # a link flap at boot
    (11.5, 6, "ixgbe 0000:01:00.0 eth0: NIC Link is Up 10 Gbps, Flow Control: RX/TX"),
    (30.0, 6, "veth3f2a1b0: Link is Down"),
    (30.1, 6, "br-5a1c2e: port 1(veth3f2a1b0) entered disabled state"),
    (31.0, 4, "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"),
    (32.0, 4, "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x12)"),
]
WORKLOAD = [
    (60.0, 4, "NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics Exception: ESR 0x50dd30=0x1c000000"),
    (60.1, 4, "NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000008, intr 00000000. MMU Fault"),
    (60.2, 4, "NVRM: Xid (PCI:0000:3b:00): 43, pid=4242, name=python3, Ch 00000008"),
    (60.3, 4, "NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 00000008"),
]
FALLEN = [
    (90.0, 6, "NVRM: GPU at PCI:0000:3b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae"),
    (90.0, 3, "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus."),
    (90.0, 3, "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."),
]


def namespace_problem():
    """Why a private mount namespace with a bind mount over /dev/kmsg cannot
    be made here ("" when it can)."""
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    if not os.path.exists("/dev/kmsg"):
        return "no /dev/kmsg to mount over"
    probe = kmsg_file(INFORMATIONAL[:1])
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$0" /dev/kmsg && head -c 5 /dev/kmsg', probe],
                           capture_output=True, text=True, timeout=30)
    finally:
        os.unlink(probe)
    if p.returncode != 0 or not p.stdout.startswith("5,0,0"):
        return f"unshare -m + mount --bind over /dev/kmsg failed (needs root): {p.stderr.strip()[:200]}"
    return ""


NAMESPACE_PROBLEM = namespace_problem()


def with_kmsg(path, *args, timeout=180):
    """gpudiag ARGS in a mount namespace of its own where /dev/kmsg is `path`."""
    return run(["unshare", "-m", "sh", "-c", 'mount --bind "$0" /dev/kmsg && exec "$@"', path, BIN, *args],
               timeout=timeout, env=clean_env())


@unittest.skipIf(NAMESPACE_PROBLEM, NAMESPACE_PROBLEM)
class KernelLogOverDevKmsg(unittest.TestCase):
    def setUp(self):
        self.path = kmsg_file(INFORMATIONAL + WORKLOAD + FALLEN)
        self.addCleanup(os.unlink, self.path)

    def test_info_lists_the_xid_with_its_action(self):
        p = with_kmsg(self.path, "info")
        self.assertEqual(p.returncode, 0, p.stderr)
        hw = p.stdout[p.stdout.index("  hardware  "):]
        self.assertIn("hardware  node UNFIT: 1 finding to act on", hw)
        node = [l for l in hw.splitlines() if "node: " in l]
        self.assertEqual(len(node), 1, hw)
        self.assertRegex(node[0], XID79_LINE)
        self.assertIn("drain and service if it recurs", node[0])
        self.assertIn("workload, the node is fine: Xid 13 (graphics engine exception) on 0000:3b:00", hw)
        self.assertIn("counts only within a job's run: network link down on eth0", hw)
        self.assertNotIn("veth", hw.split("nic ")[0])  # the veth's line made no finding
        j = json.loads(with_kmsg(self.path, "info", "--json", "-").stdout)["hardware"]
        self.assertEqual(j["verdict"], "unfit")
        x79 = [f for f in j["findings"] if f.get("xid") == 79]
        self.assertEqual(len(x79), 1)
        self.assertEqual((x79[0]["class"], x79[0]["action"], x79[0]["device"]), ("node", "reboot", "0000:3b:00"))
        self.assertEqual(x79[0]["usec"], 90_000_000)
        self.assertEqual({f["xid"] for f in j["findings"] if f["class"] == "workload"}, {13, 31, 43, 45})

    def test_every_rank_of_the_node_is_broken_by_the_xid(self):
        p = with_kmsg(self.path, "launch", "--nproc-per-node", "2", "--", "check", "--backend", "host")
        out = strip_prefix(p.stdout)
        self.assertEqual(p.returncode, 1, out + p.stderr)
        broken = [l for l in out.splitlines() if " is broken: " in l]
        self.assertEqual(len(broken), 2, out)
        for l in broken:
            self.assertRegex(l, r"^\[[^\]]+-[01]\] is broken: " + XID79_LINE.pattern + "$")

    def test_metrics_have_a_gauge_per_finding_class(self):
        d = tempfile.mkdtemp(prefix="gpudiag-hwprom-")
        self.addCleanup(shutil.rmtree, d)
        host = None
        for name, args in (("info", ["info"]),
                           ("check", ["launch", "--nproc-per-node", "2", "--", "check", "--backend", "host"])):
            path = os.path.join(d, name + ".prom")
            with_kmsg(self.path, *args, "--prometheus", path)
            with open(path) as f:
                text = f.read()
            host = host or re.search(r'gpudiag_hw_node_unfit\{host="([^"]+)"\} 1$', text, re.M).group(1)
            self.assertIn(f'gpudiag_hw_node_unfit{{host="{host}"}} 1\n', text, name)
            self.assertIn(f'gpudiag_hw_findings{{host="{host}",class="node",action="reboot"}} 1\n', text, name)
            # NVIDIA's catalogue: Xid 13 and 31 RESTART_APP, 43 IGNORE, 45 WORKFLOW_XID_45
            self.assertIn(f'gpudiag_hw_findings{{host="{host}",class="workload",action="restart_app"}} 2\n', text, name)
            self.assertIn(f'gpudiag_hw_findings{{host="{host}",class="workload",action="none"}} 2\n', text, name)

    def test_workload_xids_and_an_old_link_flap_fail_nothing(self):
        path = kmsg_file(INFORMATIONAL + WORKLOAD)
        self.addCleanup(os.unlink, path)
        p = with_kmsg(path, "launch", "--nproc-per-node", "2", "--", "check", "--backend", "host")
        out = strip_prefix(p.stdout)
        self.assertEqual(p.returncode, 0, out + p.stderr)
        self.assertEqual(len(re.findall(r"\] is OK \(global rank", out)), 2, out)
        j = json.loads(with_kmsg(path, "info", "--json", "-").stdout)["hardware"]
        self.assertEqual(j["verdict"], "fit")
        self.assertFalse([f for f in j["findings"] if f["unfit"]])


class ThisMachinesKernelLog(unittest.TestCase):
    """A healthy input must give no finding that fails the node: false alarms
    are as bad as misses."""

    def test_no_node_finding_and_the_check_stays_ok(self):
        p = run([BIN, "info", "--json", "-"], env=clean_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        hw = json.loads(p.stdout)["hardware"]
        self.assertEqual(hw["verdict"], "fit", hw["findings"])
        self.assertFalse([f for f in hw["findings"] if f["unfit"]], hw["findings"])
        if not hw["kernel_log"]["read"]:
            self.assertTrue(hw["unreadable"][0].startswith("cannot read the kernel log (/dev/kmsg): "))
        c = run([BIN, "launch", "--nproc-per-node", "2", "--", "check", "--backend", "host"], env=clean_env())
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)


if __name__ == "__main__":
    unittest.main()
