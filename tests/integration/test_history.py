"""gpudiag's memory across jobs (--history DIR, GPUDIAG_HISTORY; docs/history.md),
with real processes writing real files:
  - sixteen gpudiag processes (checks and launches) writing into one folder at
    once: every record is there, whole, and none is left half-written;
  - files that are not records (torn, foreign, oversized, a link, a FIFO) are
    skipped and counted by `gpudiag history`, which still exits 0;
  - a GPU that comes back under another host name is named;
  - three network-namespace nodes, each a launcher of a real `check --backend
    host`, node-3's rank dying of SIGSEGV: the launchers and check's rank 0
    write into one folder at once, node-3 alone is blamed, once (one job);
    then a sweep of the same nodes with --exclude-history 1 leaves node-3 out
    and says why;
  - the command line's refusals.
Every order comes from a process's exit, none from a sleep."""
import concurrent.futures
import json
import os
import shutil
import tempfile
import unittest

from harness import BIN, clean_env, raise_at, run
from netns_nodes import on_nodes, star


def record(host, job, verdict, time, gpus=()):
    return {"schema": "gpudiag-history/1", "time": time, "command": "check", "host": host,
            "job": {"id": job, "source": ""}, "verdict": verdict,
            "reason": "rank 1 broken in device: memory pattern mismatch" if verdict == "fault" else "",
            "gpus": [{"uuid": g, "serial": "", "bus_id": "", "at_fault": verdict == "fault"}
                     for g in gpus],
            "nics": []}


class HistoryFolder(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpudiag-history-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def report(self, *args):
        p = run([BIN, "history", self.dir, "--json", "-", *args], env=clean_env(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout), p.stderr

    def put(self, name, doc):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))

    def test_sixteen_writers_at_once_lose_nothing(self):
        folder = os.path.join(self.dir, "shared")  # made by whichever writer comes first

        def one(i):
            env = dict(clean_env(), GPUDIAG_TOKEN=f"job-{i}")
            if i % 2:  # half name the folder in the environment, half on the command line
                env["GPUDIAG_HISTORY"] = folder
                args = [BIN, "check", "--backend", "host", "--no-compute", "--iters", "1"]
            else:
                args = [BIN, "launch", "--nproc-per-node", "1", "--history", folder,
                        "--no-gpudiag", "--", "true"]
            return run(args, env=env, timeout=240)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            done = list(pool.map(one, range(16)))
        for p in done:
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        names = os.listdir(folder)
        self.assertEqual([n for n in names if n.startswith(".")], [])  # no temporary left
        self.assertEqual(len(names), 16, names)
        self.dir = folder
        doc, _ = self.report()
        self.assertEqual((doc["records"], doc["skipped"]), (16, 0))
        self.assertEqual(len(doc["hosts"]), 1)
        self.assertEqual(doc["hosts"][0]["jobs"], 16)  # sixteen tokens, sixteen jobs
        self.assertEqual(doc["hosts"][0]["faults"], 0)
        kinds = []
        for n in names:
            with open(os.path.join(folder, n)) as f:
                kinds.append(json.load(f)["command"])
        kinds.sort()
        self.assertEqual(kinds, ["check"] * 8 + ["launch"] * 8)

    def test_what_is_not_a_record_is_skipped_and_counted(self):
        self.put("a.json", record("n1", "slurm-1", "fault", "2026-12-01T00:00:00Z"))
        self.put("torn.json", json.dumps(record("n1", "slurm-2", "fault", "2026-12-02T00:00:00Z"))[:70])
        self.put("foreign.json", {"schema": "somebody-else/1"})
        self.put("typed.json", dict(record("n1", "slurm-3", "fault", "2026-12-03T00:00:00Z"), gpus="GPU-1"))
        self.put("big.json", " " * (64 * 1024 + 1))
        os.mkfifo(os.path.join(self.dir, "fifo.json"))  # never waited on
        os.symlink("/etc/passwd", os.path.join(self.dir, "link.json"))
        self.put(".x.json.tmp", "{")  # a writer's temporary: not a record yet, not counted
        doc, text = self.report()
        self.assertEqual(doc["records"], 1)
        self.assertEqual(doc["skipped"], 6)
        self.assertEqual(doc["hosts"][0]["faults"], 1)
        self.assertIn("6 files skipped", text)
        self.assertIn("torn.json: not a JSON object", text)

    def test_a_gpu_under_another_host_name_is_named(self):
        self.put("1.json", record("n1", "slurm-1", "fault", "2026-12-01T00:00:00Z", ["GPU-aa"]))
        self.put("2.json", record("n9", "slurm-2", "fault", "2026-12-02T00:00:00Z", ["GPU-aa"]))
        self.put("3.json", record("n9", "slurm-3", "ok", "2026-12-03T00:00:00Z", ["GPU-bb"]))
        doc, text = self.report()
        self.assertEqual(doc["moves"], [{"uuid": "GPU-aa", "from": "n1", "to": "n9",
                                         "time": "2026-12-02T00:00:00Z"}])
        self.assertEqual(doc["gpus"][0], {"uuid": "GPU-aa", "faults": 2, "jobs": 2,
                                          "hosts": ["n1", "n9"]})
        self.assertIn("moved: GPU-aa was on n1, then on n9", text)
        # --days: only the last days' records (these are from 2026 on a clock that may be before).
        doc, _ = self.report("--days", "0")
        self.assertEqual(doc["records"], 3)

    def test_refusals(self):
        p = run([BIN, "history", os.path.join(self.dir, "absent")], env=clean_env(), timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        p = run([BIN, "sweep", "--exclude-history", "2"], env=clean_env(), timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--history DIR", p.stderr)


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class HistoryOfThreeHosts(unittest.TestCase):
    PREFIX = "ghs"

    def setUp(self):
        star(self, self.PREFIX, 3)
        self.dir = tempfile.mkdtemp(prefix="gpudiag-history-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.history = os.path.join(self.dir, "history")

    def nodes(self, port, tail, env):
        """node-1..node-3 at once, each a launcher of two ranks running `tail`
        under one job token (as SLURM_JOB_ID would be)."""
        return on_nodes(self.PREFIX, {
            i: (f"hostname node-{i}; exec {BIN} launch --nnodes 3 --node-rank {i - 1} "
                f"--nproc-per-node 2 --master-addr 10.78.0.1 --master-port {port} "
                f"--history {self.history} -- " + tail)
            for i in (1, 2, 3)}, dict(GPUDIAG_SECRET="h" * 32, **env), timeout=240)

    def test_the_node_at_fault_is_blamed_once_and_then_left_out(self):
        # launch --history reaches its check ranks: they record their verdict too.
        outs = self.nodes(29781, "check --backend host --no-compute --timeout 30",
                          dict(raise_at("SIGSEGV@all-reduce:5"), GPUDIAG_TOKEN="job-1"))
        self.assertNotEqual(outs[1][0], 0, outs[1][1] + outs[1][2])
        p = run([BIN, "history", self.history, "--json", "-"], env=clean_env(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        # Three launchers and check's rank 0 (one record per host): six records.
        self.assertEqual((doc["records"], doc["skipped"]), (6, 0), p.stderr)
        by_host = {h["host"]: h for h in doc["hosts"]}
        self.assertEqual(set(by_host), {"node-1", "node-2", "node-3"})
        # The launch and the check it ran are one job: node-3 blamed once.
        self.assertEqual((by_host["node-3"]["faults"], by_host["node-3"]["jobs"]), (1, 1), doc)
        self.assertIn("SIGSEGV", by_host["node-3"]["last_reason"])
        self.assertEqual(by_host["node-1"]["faults"] + by_host["node-2"]["faults"], 0, doc)

        # A sweep of the same nodes leaves node-3 out, saying why.
        exclude = os.path.join(self.dir, "exclude")
        outs = self.nodes(29782, f"sweep --backend host --timeout 30 --pair-timeout 10 "
                                 f"--exclude-history 1 --exclude-file {exclude} "
                                 f"--json {self.dir}/sweep.json", {"GPUDIAG_TOKEN": "job-2"})
        rc, out, err = outs[1]
        self.assertEqual(rc, 1, out + err)
        with open(exclude) as f:
            self.assertEqual(f.read(), "node-3\n")
        with open(os.path.join(self.dir, "sweep.json")) as f:
            nodes = {n["host"]: n for n in json.load(f)["nodes"]}
        self.assertEqual(nodes["node-3"]["state"], "FAILED")
        self.assertIn("at fault in 1 job of the history", nodes["node-3"]["reason"])
        self.assertEqual(nodes["node-1"]["state"], "OK")
        self.assertIn("leaving out node-3", err)
        # The sweep did not test node-3: its record is no fresh fault.
        doc = json.loads(run([BIN, "history", self.history, "--json", "-"], env=clean_env(),
                             timeout=60).stdout)
        self.assertEqual({h["host"]: h["faults"] for h in doc["hosts"]}["node-3"], 1)


if __name__ == "__main__":
    unittest.main()
