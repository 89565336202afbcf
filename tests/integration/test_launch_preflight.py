"""gpudiag launch --preflight with real launchers as nodes: three
network-namespace hosts (scripts/netns-hosts.sh star), each launcher checking
its own node with gpudiag check before round 0. On node-3 the check's rank 1
is killed in its compute phase (the test hook GPUDIAG_TEST_RAISE, set in that
launcher's environment only): every launcher names node-3 as left out by the
preflight, the job runs and finishes on the other two nodes (ranks 0-3 of 4),
node-3's launcher waits for the job's end and exits 2 (it ran no attempt),
and each --json report says so. With every node healthy, nobody is left out
and the job runs on all three: each check's JSON report was read (its speed
judged: the host backend's rates are never slow) and its private folder
removed. Every order here comes from a process's exit,
none from a sleep."""
import json
import os
import re
import shutil
import subprocess
import unittest

from harness import BIN, clean_env, free_port, write_scripts
from netns_nodes import star

GUARD = 300  # seconds; each job here ends well before it

# What each rank of the job runs: its place in the round, and its host.
JOB = 'echo "rank $RANK of $WORLD_SIZE group $GROUP_RANK of $GROUP_WORLD_SIZE on $(hostname)"'


@unittest.skipUnless(os.geteuid() == 0, "needs root (network namespaces)")
class PreflightAcrossThreeHosts(unittest.TestCase):
    PREFIX = "gpf"

    def setUp(self):
        star(self, self.PREFIX, 3)
        self.dir = write_scripts("gpudiag-preflight-", {})
        self.addCleanup(shutil.rmtree, self.dir, True)

    def job(self, broken_node=None, slow="exclude"):
        """Runs node-1..node-3 at once; returns {i: (rc, stdout, stderr, json)}."""
        port = free_port()
        procs = {}
        for i in (1, 2, 3):
            # last_call_timeout 30: a round closes at once when all three came,
            # so a node whose check is slower under load is still in it.
            inner = (f"hostname node-{i}; "
                     f"exec {BIN} launch --nnodes 2:3 --nproc-per-node 2 "
                     f"--rdzv-backend c10d --rdzv-endpoint 10.78.0.1:{port} --rdzv-id preflight "
                     f"--rdzv-conf last_call_timeout=30 --preflight --preflight-timeout 60 "
                     f"--preflight-slow {slow} "
                     f"--json {self.dir}/node{i}.json --no-gpudiag -- sh -c '{JOB}'")
            tmp = os.path.join(self.dir, f"tmp{i}")
            os.makedirs(tmp, exist_ok=True)
            env = dict(clean_env(), GPUDIAG_SECRET="p" * 32, TMPDIR=tmp)
            if i == broken_node:
                env["GPUDIAG_TEST_RAISE"] = "SIGKILL@compute:1"
            procs[i] = subprocess.Popen(
                ["ip", "netns", "exec", f"{self.PREFIX}-{i}", "unshare", "--uts", "sh", "-c", inner],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        outs = {}
        for i, p in procs.items():
            try:
                o, e = p.communicate(timeout=GUARD)
            finally:
                p.kill()
            doc = None
            try:
                with open(f"{self.dir}/node{i}.json") as f:
                    doc = json.load(f)
            except (OSError, ValueError):
                pass
            outs[i] = (p.returncode, o, e, doc)
        return outs

    def test_a_node_whose_preflight_fails_is_left_out_and_the_job_runs_on_two(self):
        outs = self.job(broken_node=3)
        why = re.compile(r"gpudiag launch: excluding node-3 \(launcher pid \d+\) from round 0: "
                         r"preflight: gpudiag check found this node broken \([^\n]*rank 1 dead: "
                         r"killed by SIGKILL[^\n]*\); the job goes on with 2 node\(s\)")
        for i in (1, 2, 3):
            self.assertRegex(outs[i][2], why, f"node-{i}: " + outs[i][2][-3000:])
        seen = []
        for i in (1, 2):
            rc, out, err, doc = outs[i]
            self.assertEqual(rc, 0, f"node-{i}: " + err[-3000:])
            self.assertIn("preflight: this node passed gpudiag check", err)
            seen += re.findall(r"rank (\d) of 4 group (\d) of 2 on node-" + str(i), out)
            self.assertIsNotNone(doc, f"node-{i}: " + err[-3000:])
            self.assertEqual(len(doc["rounds"]), 1, doc["rounds"])
            excluded = doc["rounds"][0]["excluded"]
            self.assertEqual([e["host"] for e in excluded], ["node-3"])
            self.assertTrue(excluded[0]["why"].startswith("preflight: "), excluded)
            self.assertIsNone(doc["rounds"][0]["preflight_fault"])
            # A preflight is not an attempt: one attempt, no restart spent.
            self.assertEqual([a["attempt"] for a in doc["attempts"]], [0], doc["attempts"])
        self.assertEqual(sorted(int(r) for r, _ in seen), [0, 1, 2, 3], seen)
        # node-3's launcher: its check failed, it was left out and ran nothing.
        rc, out, err, doc = outs[3]
        self.assertEqual(rc, 2, err[-3000:])
        self.assertIn("this node is left out of round 0", err)
        self.assertRegex(err, r"the job ended with exit status 0 on node-[12] .* while this node "
                              r"was left out of round 0 \(preflight: gpudiag check found this "
                              r"node broken")
        self.assertNotIn(" of 4 group", out)
        self.assertIsNotNone(doc, err[-3000:])
        self.assertIsNone(doc["rounds"][0]["node_rank"])
        self.assertTrue(doc["rounds"][0]["preflight_fault"].startswith("preflight: gpudiag check "
                                                                       "found this node broken"))

    def test_healthy_nodes_pass_the_preflight_and_the_job_runs_on_three(self):
        outs = self.job(slow="warn")
        seen = []
        for i in (1, 2, 3):
            rc, out, err, doc = outs[i]
            self.assertEqual(rc, 0, f"node-{i}: " + err[-3000:])
            self.assertIn("preflight: gpudiag check of this node (2 rank(s), at most 60 s) before "
                          "round 0", err)
            self.assertIn("preflight: this node passed gpudiag check", err)
            self.assertNotIn("its speed not judged", err)
            self.assertNotIn("but is slow", err)
            self.assertEqual([f for f in os.listdir(os.path.join(self.dir, f"tmp{i}"))
                              if f.startswith("gpudiag-preflight-")], [])
            self.assertNotIn("excluding", err)
            seen += re.findall(r"rank (\d) of 6 group (\d) of 3 on node-" + str(i), out)
            self.assertIsNotNone(doc, f"node-{i}: " + err[-3000:])
            self.assertEqual(doc["rounds"][0]["nnodes"], 3)
            self.assertEqual(doc["rounds"][0]["excluded"], [])
            self.assertIsNone(doc["rounds"][0]["preflight_fault"])
        self.assertEqual(sorted(int(r) for r, _ in seen), list(range(6)), seen)


if __name__ == "__main__":
    unittest.main()
