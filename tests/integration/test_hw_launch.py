"""The kernel log's hardware evidence in `gpudiag launch`'s failure report and
in `gpudiag sweep`'s verdict, with a file in /dev/kmsg's format bind-mounted
over /dev/kmsg in a private mount namespace (as test_hw_evidence does).

launch: a rank killed by SIGKILL is quoted the node's kernel log within a
minute before it, so a SIGKILL beside an Xid 79 or an OOM kill says which;
what was logged before the job is not quoted, and a log with nothing says so;
`launch --json` carries the same quote in `kernel_log`.
The lines that must be quoted are appended while the rank is stopped at its
all-reduce (GPUDIAG_TEST_RAISE=SIGSTOP@all-reduce:1, waited for by its state),
with the kernel log's clock, then the test kills it: no sleep picks a moment.

sweep: a node whose kernel log holds an Xid 79 is FAILED with that evidence
and in the exclude file; workload Xids and old link flaps exclude nothing."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BIN, clean_env, descendants, resume, wait_stopped
from test_hw_evidence import FALLEN, INFORMATIONAL, NAMESPACE_PROBLEM, WORKLOAD, XID79_LINE, kmsg_file, with_kmsg

IN_NAMESPACE = ("unshare", "-m", "sh", "-c", 'mount --bind "$0" /dev/kmsg && exec "$@"')


def rank_pid(root, rank):
    """The pid of the process under `root` whose environment says RANK=rank
    (None while there is none: the shell may still be mounting)."""
    for line in descendants(root)[1:]:
        pid = int(line.split()[0])
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"\0RANK={rank}\0".encode() in b"\0" + f.read():
                    return pid
        except OSError:
            continue
    return None


@unittest.skipIf(NAMESPACE_PROBLEM, NAMESPACE_PROBLEM)
class LaunchQuotesTheKernelLog(unittest.TestCase):
    def launch(self, path, raise_spec, during=None):
        """`launch --nproc-per-node 2 --json FILE -- check` over the kmsg file
        `path`; `during(rank1_pid)` runs once rank 1 has stopped itself. The
        launcher's JSON document is kept in self.doc."""
        env = clean_env()
        if raise_spec:
            env["GPUDIAG_TEST_RAISE"] = raise_spec
        report = tempfile.NamedTemporaryFile(prefix="gpudiag-launch-", suffix=".json", delete=False).name
        self.addCleanup(os.unlink, report)
        p = subprocess.Popen([*IN_NAMESPACE, path, BIN, "launch", "--nproc-per-node", "2", "--json", report, "--",
                              "check", "--backend", "host"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, start_new_session=True)
        pid = None
        try:
            if during:
                deadline = time.monotonic() + 60
                while pid is None and time.monotonic() < deadline:
                    pid = rank_pid(p.pid, 1)
                    time.sleep(0.02) if pid is None else None
                self.assertIsNotNone(pid, "rank 1 did not start")
                wait_stopped(pid)
                during(pid)
            out, err = p.communicate(timeout=120)
        finally:
            if pid:
                resume(pid)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
        with open(report) as f:
            self.doc = json.load(f)
        return p.returncode, out, err

    def test_a_sigkill_beside_an_xid_and_an_oom_kill_says_which(self):
        path = kmsg_file(INFORMATIONAL + WORKLOAD)  # all logged before the job
        self.addCleanup(os.unlink, path)

        def during(pid):
            usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)  # the kernel log's clock
            with open(path, "a") as f:
                f.write(f"3,800,{usec},-;Out of memory: Killed process {pid} (gpudiag) total-vm:81234567kB, "
                        "anon-rss:79000000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:160000kB oom_score_adj:0\n")
                f.write(f"3,801,{usec + 10},-;Out of memory: Killed process {pid + 100000} (other) total-vm:1kB\n")
                f.write(f"3,802,{usec + 20},-;NVRM: Xid (PCI:0000:3b:00): 79, pid={pid}, name=gpudiag, "
                        "GPU has fallen off the bus.\n")
            os.kill(pid, signal.SIGKILL)

        rc, out, err = self.launch(path, "SIGSTOP@all-reduce:1", during)
        self.assertNotEqual(rc, 0, err)
        self.assertRegex(err, r"rank 1 \(pid \d+\) failed first: killed by SIGKILL")
        m = re.search(r"gpudiag launch: the kernel log of (\S+) within a minute before it:\n((?:  .*\n)+)", err)
        self.assertTrue(m, err)
        quoted = m.group(2).splitlines()
        self.assertEqual(len(quoted), 2, quoted)
        self.assertRegex(quoted[0], r"^  OOM killer: Out of memory: Killed process \d+ \(gpudiag\) total-vm")
        self.assertRegex(quoted[1], r"^  node: " + XID79_LINE.pattern + "$")
        for before_the_job in ("Xid 13", "Xid 43", "eth0", "Corrected", "EDAC", "veth", "other"):
            self.assertNotIn(before_the_job, m.group(2))
        # launch --json carries the same quote.
        quotes = self.doc["kernel_log"]
        self.assertEqual(len(quotes), 1, quotes)
        self.assertEqual((quotes[0]["at"], quotes[0]["rank"], quotes[0]["host"], quotes[0]["error"]),
                         ("failure", 1, m.group(1), None))
        self.assertEqual(["  " + l for l in quotes[0]["lines"]], quoted)

    def test_a_sigkill_with_nothing_in_the_kernel_log_says_so(self):
        path = kmsg_file(INFORMATIONAL + WORKLOAD + FALLEN[:1])  # no finding within the job
        self.addCleanup(os.unlink, path)
        rc, out, err = self.launch(path, "SIGKILL@all-reduce:1")
        self.assertNotEqual(rc, 0, err)
        self.assertRegex(err, r"rank 1 \(pid \d+\) failed first: killed by SIGKILL")
        self.assertRegex(err, r"gpudiag launch: the kernel log of \S+ shows no hardware error and no OOM kill "
                              r"within a minute before it\n")
        self.assertNotIn("within a minute before it:", err)
        quotes = self.doc["kernel_log"]
        self.assertEqual([(q["at"], q["rank"], q["lines"]) for q in quotes], [("failure", 1, [])], quotes)

    def test_a_job_that_ends_well_quotes_nothing(self):
        path = kmsg_file(INFORMATIONAL + WORKLOAD + FALLEN[:1])  # before the job: no finding in its run
        self.addCleanup(os.unlink, path)
        rc, out, err = self.launch(path, None)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.doc["kernel_log"], [])
        self.assertNotIn("the kernel log of", err)


@unittest.skipIf(NAMESPACE_PROBLEM, NAMESPACE_PROBLEM)
class SweepExcludesAnUnfitNode(unittest.TestCase):
    def sweep(self, records):
        path = kmsg_file(records)
        self.addCleanup(os.unlink, path)
        exclude = tempfile.NamedTemporaryFile(prefix="gpudiag-exclude-", delete=False).name
        self.addCleanup(os.unlink, exclude)
        p = with_kmsg(path, "launch", "--nproc-per-node", "2", "--", "sweep", "--backend", "host",
                      "--exclude-file", exclude, "--json", exclude + ".json")
        self.addCleanup(lambda: os.path.exists(exclude + ".json") and os.unlink(exclude + ".json"))
        with open(exclude) as f:
            return p, f.read()

    def test_an_xid_79_fails_the_node_with_its_evidence(self):
        p, excluded = self.sweep(INFORMATIONAL + WORKLOAD + FALLEN)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        row = [l for l in p.stdout.splitlines() if " FAILED " in l]
        self.assertEqual(len(row), 1, p.stdout)
        self.assertRegex(row[0], r"FAILED +its hardware: " + XID79_LINE.pattern + "$")
        host = row[0].split("]: ", 1)[-1].split()[0]
        self.assertEqual(excluded.strip(), host)

    def test_workload_xids_and_an_old_link_flap_exclude_nothing(self):
        p, excluded = self.sweep(INFORMATIONAL + WORKLOAD)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("no node to exclude", p.stdout)
        self.assertEqual(excluded.strip(), "")


if __name__ == "__main__":
    unittest.main()
