"""The MPI plane through node leaders and group judges (src/plane/
mpi_tree_plane.cpp) under a real mpirun: 8 ranks on this host as 4 "nodes" of
2 (GPUDIAG_MPI_NODE_SIZE stands in for MPI_Comm_split_type's hosts) in 2 groups
of 2 nodes (GPUDIAG_TREE_GROUP_NODES): rank 0 judges group 0 (ranks 0-3) and
hears group 1 (ranks 4-7) from its judge, rank 4. A healthy job, a stopped
rank, and a stopped group judge, whose other node reports to rank 0 itself."""
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest
import uuid

from harness import BIN, mpirun_env, process_state, raise_at, require, strip_prefix

GROUPS = {"GPUDIAG_TREE": "on", "GPUDIAG_MPI_NODE_SIZE": "2", "GPUDIAG_TREE_GROUP_NODES": "2",
          "GPUDIAG_LOG_LEVEL": "info"}


def pids_marked(mark):
    """The pids whose environment holds GPUDIAG_TEST_MARK=mark (this test's ranks)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if f"GPUDIAG_TEST_MARK={mark}".encode() in f.read().split(b"\0"):
                    out.append(int(name))
        except OSError:
            pass
    return out


class MpiGroups(unittest.TestCase):
    def job(self, extra=None, timeout=240):
        """mpirun -np 8 gpudiag check through groups; (rc, stdout, stderr). A
        rank a test stopped is killed (by pid) once it is the only one left,
        so mpirun can end; any rank left at the end is killed too."""
        require("mpirun")
        mark = uuid.uuid4().hex
        env = mpirun_env(dict(GROUPS, GPUDIAG_TEST_MARK=mark, **(extra or {})))
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            p = subprocess.Popen(["mpirun", "-np", "8", "--oversubscribe", "--tag-output", BIN,
                                  "check", "--backend", "host", "--timeout", "10"],
                                 stdout=out, stderr=err, text=True, env=env)
            deadline = time.monotonic() + timeout
            try:
                while p.poll() is None and time.monotonic() < deadline:
                    ranks = [pid for pid in pids_marked(mark) if pid != p.pid]
                    if ranks and all(process_state(pid) == "T" for pid in ranks):
                        for pid in ranks:
                            os.kill(pid, signal.SIGKILL)
                    time.sleep(0.5)
            finally:
                for pid in pids_marked(mark):
                    if pid != p.pid:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                if p.poll() is None:
                    p.kill()
                p.wait()
            self.assertLess(time.monotonic(), deadline, "mpirun did not end in time")
            out.seek(0)
            err.seek(0)
            return p.returncode, out.read(), err.read()

    @staticmethod
    def by_rank(out):
        """{rank: its lines} from mpirun --tag-output's "[1,R]<stdout>:" prefix."""
        ranks = {}
        for line in out.splitlines():
            m = re.match(r"^\[\d+,(\d+)\]<stdout>:(.*)$", line)
            if m:
                ranks.setdefault(int(m.group(1)), []).append(m.group(2))
        return {r: "\n".join(lines) for r, lines in ranks.items()}

    def test_a_healthy_job_meets_through_the_groups(self):
        rc, out, err = self.job()
        self.assertEqual(rc, 0, out[-3000:] + err[-3000:])
        ranks = self.by_rank(out)
        for r in range(8):
            self.assertIn(f"is OK (global rank: {r}/8)", ranks.get(r, ""), (r, out[-3000:]))
        text = strip_prefix(ranks[0])
        self.assertIn("summary: 8/8 ranks OK", text)
        # The report's table has every rank's timings: rank 0 asked group 1's
        # judge for its records at the barrier.
        rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
        self.assertEqual([row[0] for row in rows], [str(r) for r in range(8)], text)
        for row in rows:
            self.assertEqual(row[-1], "OK", row)
            self.assertNotIn("-", row[4:9], row)
        # Through the groups: rank 0 merged two groups' reviews.
        self.assertIn("MPI checkpoints through 4 node leaders in 2 groups of up to 2 nodes", err)
        self.assertIn("compared across all 2 groups of nodes", text)

    def test_a_stopped_rank_is_named_by_every_rank(self):
        # Rank 7 (node 3, group 1) stops as it enters the exchange: its leader
        # (rank 6) names it to its judge (rank 4), which tells rank 0.
        rc, out, err = self.job(raise_at("SIGSTOP@exchange:7"))
        self.assertNotEqual(rc, 0)
        ranks = self.by_rank(out)
        for r in range(7):
            text = ranks.get(r, "")
            self.assertRegex(text, r"is broken: .*rank 7\b[^;]* did not reach the exchange checkpoint",
                             (r, out[-3000:] + err[-2000:]))
            self.assertIn("did not reach its node's leader (rank 6)", text, (r, text[-2000:]))
        # Rank 7 may still speak: when a rank exits non-zero, mpirun aborts
        # the job and continues a stopped rank (SIGCONT before SIGTERM), which
        # then reads the abort ("[vm-7] is broken: stopped at the communicator
        # checkpoint: rank 0 ... failed in exchange ..."). Never OK.
        self.assertNotIn("is OK", ranks.get(7, ""), (ranks.get(7, "")[-2000:], err[-2000:]))

    def test_a_stopped_group_judge_costs_its_own_node(self):
        # Rank 4 leads node 2 (ranks 4-5) and judges group 1 (nodes 2-3): it
        # stops as it enters the exchange. Node 3's leader (rank 6) sees no
        # answer by its deadline and reports to rank 0 itself, so ranks 6-7
        # are heard: only node 2's ranks are missing.
        rc, out, err = self.job(raise_at("SIGSTOP@exchange:4"))
        self.assertNotEqual(rc, 0)
        ranks = self.by_rank(out)
        label = ("node 2 (ranks 4-5): its leader (rank 4), the judge of group 1 (nodes 2-3, "
                 "ranks 4-7), did not report")
        for r in (0, 1, 2, 3, 6, 7):
            text = ranks.get(r, "")
            self.assertRegex(text, r"is broken: .*rank 4\b[^;]* did not reach the exchange checkpoint",
                             (r, out[-3000:] + err[-2000:]))
            self.assertIn(label, text, (r, text[-2000:]))
            self.assertNotRegex(text, r"rank [67]\b[^;(]* did not reach", (r, text[-2000:]))
        self.assertIn("the judge of group 1 (nodes 2-3, ranks 4-7) (rank 4) did not take this "
                      "node's part by the deadline; reporting to rank 0 directly", err)
        # Rank 0's report: node 2 missing, node 3 (heard directly) not.
        text = strip_prefix(ranks[0])
        self.assertIn("ranks 4,5 missing", text, text[-3000:])
        rows = {line.split()[0]: line for line in text.splitlines() if line[:1].isdigit()}
        for r in ("4", "5"):
            self.assertIn("MISSING", rows.get(r, ""), text[-3000:])
        for r in ("6", "7"):
            self.assertNotIn("MISSING", rows.get(r, "MISSING"), text[-3000:])


if __name__ == "__main__":
    unittest.main()
