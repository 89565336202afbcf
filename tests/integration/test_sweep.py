"""gpudiag sweep over a pool of "nodes" made of network namespaces on one
bridge (scripts/netns-hosts.sh star), each node a gpudiag launch of two ranks
with its own host name, as a cluster's nodes would be:
  - node4's link to the switch limited to 200 Mbit/s (tc tbf, a slow NIC),
    node5's first rank killed at the start of round 2 (it dies mid-sweep),
    node7 named in --hosts but never started:
    exactly node4, node5 and node7 are excluded, each with its own state;
  - a healthy pool: exit 0 and an empty exclude list;
  - docs/sweep.md's recipe for such a pool, run as written, excludes its
    throttled node.
Plus the command line's refusals, and the sweep under mpirun."""
import json
import os
import subprocess
import tempfile
import unittest

from harness import BIN, SOURCE_DIR, clean_env, mpirun, raise_at, run, strip_prefix
from netns_nodes import on_nodes, star

NETNS = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")


@unittest.skipUnless(os.geteuid() == 0, "network namespaces need root")
class SweepOverNamespaceNodes(unittest.TestCase):
    PREFIX = "gsp"

    def pool(self, n, throttle=None):
        star(self, self.PREFIX, n)
        if throttle:
            p = run([NETNS, "throttle", self.PREFIX, str(throttle), "200mbit"], timeout=30)
            if p.returncode != 0:
                self.skipTest("tc tbf (sch_tbf) is not available here: " + p.stderr.strip())

    def sweep(self, n, *args, env=None, pair_timeout=10):
        """Starts node1..nodeN (two ranks each); returns [(returncode, stdout, stderr)]."""
        port = 29760
        outs = on_nodes(self.PREFIX, {
            i: (f"hostname node{i}; exec {BIN} launch --nnodes {n} --node-rank {i - 1} "
                f"--nproc-per-node 2 --master-addr 10.78.0.1 --master-port {port} -- sweep "
                f"--backend host --timeout 30 --pair-timeout {pair_timeout} " + " ".join(args))
            for i in range(1, n + 1)}, dict(GPUDIAG_SECRET="s" * 32, **(env or {})))
        return [outs[i] for i in range(1, n + 1)]

    def test_slow_dead_and_absent_nodes_are_excluded_and_no_other(self):
        self.pool(6, throttle=4)
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        files = {k: os.path.join(d, k) for k in ("exclude", "hosts", "mpi", "json")}
        outs = self.sweep(6, "--hosts", "'node[1-7]'", "--exclude-file", files["exclude"],
                          "--good-hostfile", files["hosts"], "--good-mpi-hostfile", files["mpi"],
                          "--json", files["json"], env=raise_at("SIGKILL@pool-round#2:8"))
        rc, out, err = outs[0]
        text = strip_prefix(out)
        self.assertEqual(rc, 1, text + err)
        with open(files["exclude"]) as f:
            self.assertEqual(f.read(), "node[4-5,7]\n", text)
        with open(files["hosts"]) as f:
            self.assertEqual(f.read().split(), ["node1", "node2", "node3", "node6"])
        with open(files["mpi"]) as f:
            self.assertEqual(f.read().splitlines(),
                             [f"node{i} slots=2" for i in (1, 2, 3, 6)])
        with open(files["json"]) as f:
            doc = json.load(f)
        states = {n["host"]: n["state"] for n in doc["nodes"]}
        self.assertEqual(states, {"node1": "OK", "node2": "OK", "node3": "OK", "node4": "SLOW",
                                  "node5": "MISSING", "node6": "OK", "node7": "MISSING"}, text)
        slow = next(n for n in doc["nodes"] if n["host"] == "node4")
        # The evidence is a measurement against a node that is itself OK, below
        # the threshold, at the configured rate (200 Mbit/s = 0.025 GB/s).
        self.assertIn(states[slow["test"]["partner"]], ("OK",))
        self.assertLess(slow["test"]["measured_gbps"], 0.03)
        self.assertLess(slow["test"]["measured_gbps"], slow["test"]["threshold_gbps"])
        self.assertIn("round 2", next(n for n in doc["nodes"] if n["host"] == "node5")["reason"])
        self.assertIn("never arrived", next(n for n in doc["nodes"] if n["host"] == "node7")["reason"])
        # Every node met at least two partners from other nodes.
        for host in ("node1", "node2", "node3", "node4", "node6"):
            peers = {t["peer"] for t in doc["tests"] if t["host"] == host} | \
                    {t["host"] for t in doc["tests"] if t["peer"] == host}
            self.assertGreaterEqual(len(peers - {host, None}), 2, host)
        self.assertIn("exclude 3 of 7 node(s): node[4-5,7]", text)
        # The other nodes' ranks end too: exit 1 (the pool has nodes to exclude),
        # node5's launcher with its killed rank's 137.
        for i, (rc_i, out_i, err_i) in enumerate(outs[1:], start=2):
            self.assertEqual(rc_i, 137 if i == 5 else 1, (i, out_i[-500:], err_i[-1500:]))

    def test_the_docs_recipe_for_a_pool_on_one_machine_works_as_written(self):
        with open(os.path.join(SOURCE_DIR, "docs", "sweep.md")) as f:
            doc = f.read()
        marker = "<!-- recipe:netns-pool"
        self.assertIn(marker, doc)
        block = doc[doc.index(marker):].split("```bash\n", 1)[1].split("```", 1)[0]
        self.addCleanup(run, [NETNS, "star-down", "gdp", "4"], timeout=60)
        for f in ["/tmp/gdp-exclude.txt"] + [f"/tmp/gdp-node{i}.log" for i in range(1, 5)]:
            if os.path.exists(f):
                os.unlink(f)
        env = dict(clean_env(), PATH=os.path.dirname(BIN) + ":" + os.environ["PATH"])
        p = run(["bash", "-euo", "pipefail", "-c", block], cwd=SOURCE_DIR, env=env, timeout=400)
        logs = ""
        for i in range(1, 5):
            with open(f"/tmp/gdp-node{i}.log") as f:
                logs += f"--- node{i}\n" + f.read()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr + logs)
        self.assertEqual(p.stdout.strip(), "node3", logs)
        self.assertIn("sweep: 1 node to exclude", logs)

    def test_a_healthy_pool_excludes_nothing(self):
        self.pool(4)
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        excl = os.path.join(d, "exclude")
        outs = self.sweep(4, "--exclude-file", excl)
        text = strip_prefix(outs[0][1])
        self.assertEqual([o[0] for o in outs], [0, 0, 0, 0], text + outs[0][2])
        with open(excl) as f:
            self.assertEqual(f.read(), "\n")
        self.assertIn("no node to exclude: every one of the 4 node(s) passed", text)
        self.assertEqual(text.count(" OK "), 4, text)


    def rendezvous_sweep(self, reporter, extra=""):
        # No --node-rank: the launchers meet at node1's rendezvous endpoint and
        # node ranks are assigned; node1 (the endpoint) holds rank 0 whatever
        # the order of arrival, prints the table and writes the file; the
        # others say where they are. Exit 1 for a node to exclude is worded as
        # the sweep's verdict, and the judge prints a line per round.
        self.pool(3, throttle=3)
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        excl = os.path.join(d, "exclude")
        ran = on_nodes(self.PREFIX, {
            i: (f"hostname node{i}; exec {BIN} launch --nnodes 3 --nproc-per-node 2 {extra} "
                "--rdzv-backend c10d --rdzv-endpoint 10.78.0.1:29770 -- sweep --backend host "
                f"--timeout 30 --pair-timeout 10 --exclude-file {excl}")
            for i in (3, 2, 1)}, dict(GPUDIAG_SECRET="s" * 32))
        outs = {i: ((o, e), rc) for i, (rc, o, e) in ran.items()}
        (out1, err1), rc1 = outs[reporter]
        text = strip_prefix(out1)
        self.assertEqual(rc1, 1, text + err1[-2000:])
        self.assertIn("exclude 1 of 3 node(s): node3", text)
        with open(excl) as f:
            self.assertEqual(f.read(), "node3\n")
        self.assertRegex(err1, r"sweep: round 1 \(\w[^)]*\): \d+ pair\(s\) in ")
        self.assertIn("judged after", err1)
        for i in (1, 2, 3):
            (out, err), rc = outs[i]
            self.assertEqual(rc, 1, (i, err[-2000:]))
            self.assertIn("ranks finished; their verdict: sweep: 1 node to exclude", err, (i, err[-2000:]))
            self.assertNotIn("first failure", err, (i, err[-2000:]))
            if i != reporter:
                self.assertIn(f"sweep: 1 node to exclude; the report and files are on node{reporter} (rank 0)",
                              strip_prefix(out), (i, out[-2000:]))
                self.assertNotIn("exclude 1 of 3", strip_prefix(out))

    def test_under_a_rendezvous_the_report_is_on_the_endpoints_node(self):
        self.rendezvous_sweep(1)

    def test_report_node_names_where_the_report_lands(self):
        self.rendezvous_sweep(2, "--report-node node2")

    def test_a_call_that_never_returns_is_ended_by_the_watchdog(self):
        # Rank 2 (node2's first rank) blocks for ever inside round 1's pair, as
        # an NCCL abort or a cudaFree on a hung GPU can (GPUDIAG_TEST_RAISE's
        # HANG): its watchdog ends it after 2 x --pair-timeout + 10 s with its
        # status line, and node1's report excludes node2 instead of hanging.
        self.pool(2)
        outs = self.sweep(2, env=raise_at("HANG@pool-round#1:2"), pair_timeout=2)
        rc2, out2, err2 = outs[1]
        self.assertIn("is broken: stuck in pool-round 1 for", strip_prefix(out2), out2 + err2[-1500:])
        self.assertNotEqual(rc2, 0)
        rc1, out1, err1 = outs[0]
        text = strip_prefix(out1)
        self.assertEqual(rc1, 1, text + err1[-1500:])
        self.assertIn("exclude 1 of 2 node(s): node2", text)


class SweepCommandLine(unittest.TestCase):
    def test_bad_values_are_one_line_and_exit_2(self):
        for args, named in [(["--hosts", "n[1-"], "host list"), (["--hosts", "n[0-999][0-999]"], "host list"),
                            (["--time-budget", "nan"], "--time-budget"), (["--iters", "0"], "--iters"),
                            (["--size", "1"], "--size")]:
            p = run([BIN, "sweep", *args], env=clean_env())
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertIn(named, p.stderr, args)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_mpirun_sweep_of_one_node(self):
        p = mpirun(2, "sweep", "--backend", "host")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("no node to exclude: every one of the 1 node(s) passed", p.stdout)


if __name__ == "__main__":
    unittest.main()
