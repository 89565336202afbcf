"""gpudiag launch's elastic rounds across attempts, with real launchers as
nodes: three network-namespace hosts (scripts/netns-hosts.sh star) running a
real torch (1.13, gloo) job under --rdzv-backend c10d and --max-restarts,
node-3's rank dying of SIGBUS in every attempt. Under --nnodes 2:3 the next
round leaves node-3 out and the job finishes on two nodes, ranks renumbered,
every launcher naming node-3 and why, node-3's launcher saying so and exiting
when the job ends; under --nnodes 3 it cannot be left out, and the job stops
with that said. A rank that raises a Python error in every attempt is the
workload's: no node is left out. On loopback: a launcher that came after
round 0 closed is admitted at round 1, opened by a failure; a torch program
on the agent store meets in the endpoint's store again at round 1. Every order here comes from a process's
exit or a line it printed, none from a sleep."""
import json
import os
import re
import shutil
import subprocess
import unittest

from harness import BIN, TORCH_PYTHON, clean_env, free_port, have_torch, write_scripts
from netns_nodes import star

GUARD = 420  # seconds; each job here ends well before it

SCRIPT = r'''
import os, signal, socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
host = socket.gethostname()
print(f"round {os.environ['TORCHELASTIC_RESTART_COUNT']} rank {rank} of {size} "
      f"group {os.environ['GROUP_RANK']} of {os.environ['GROUP_WORLD_SIZE']} on {host}", flush=True)
t = torch.ones(1)
dist.all_reduce(t)  # every rank of the round is here
if host == os.environ.get("BAD_HOST") and os.environ["LOCAL_RANK"] == "1":
    if os.environ.get("BAD_HOW") == "raise":
        raise ValueError("bad batch on " + host)
    os.kill(os.getpid(), signal.SIGBUS)
for _ in range(3):
    dist.all_reduce(t)
dist.barrier()
print(f"done {t.item()}", flush=True)
'''


@unittest.skipUnless(have_torch() and os.geteuid() == 0,
                     "needs Debian's python3-torch and root (network namespaces)")
class RoundsAcrossThreeHosts(unittest.TestCase):
    PREFIX = "grd"

    def setUp(self):
        star(self, self.PREFIX, 3)
        self.dir = write_scripts("gpudiag-rounds-", {"job.py": SCRIPT})
        self.addCleanup(shutil.rmtree, self.dir, True)

    def job(self, nnodes, bad_how="kill", restarts=2):
        """Runs node-1..node-3 at once; returns {i: (rc, stdout, stderr, json)}."""
        port = free_port()
        procs = {}
        for i in (1, 2, 3):
            inner = (f"hostname node-{i}; export GLOO_SOCKET_IFNAME={self.PREFIX}-h{i}; "
                     f"exec {BIN} launch --nnodes {nnodes} --nproc-per-node 2 "
                     f"--rdzv-backend c10d --rdzv-endpoint 10.78.0.1:{port} --rdzv-id rounds "
                     f"--max-restarts {restarts} --grace 2 --json {self.dir}/node{i}.json "
                     f"{self.dir}/job.py")
            env = dict(clean_env(), PYTHON_EXEC=TORCH_PYTHON, GPUDIAG_SECRET="r" * 32,
                       BAD_HOST="node-3", BAD_HOW=bad_how, OMP_NUM_THREADS="1")
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

    def test_the_job_goes_on_without_the_node_whose_rank_dies_of_sigbus(self):
        outs = self.job("2:3")
        why = re.compile(r"gpudiag launch: excluding node-3 \(launcher pid \d+\) from round 1: "
                         r"rank \d+ \[node-3-1\] was killed by SIGBUS, a signal it did not ask "
                         r"for; the job goes on with 2 node\(s\)")
        for i in (1, 2, 3):
            self.assertRegex(outs[i][2], why, f"node-{i}: " + outs[i][2][-3000:])
        # The two healthy nodes finish round 1 together, ranks renumbered 0..3 of 4.
        seen = []
        for i in (1, 2):
            rc, out, err, doc = outs[i]
            self.assertEqual(rc, 0, f"node-{i}: " + err[-3000:])
            seen += re.findall(r"round 1 rank (\d) of 4 group (\d) of 2 on node-" + str(i), out)
            self.assertEqual(out.count("done 256.0"), 2, out)  # 4 all-reduces of 4 ranks
            self.assertEqual(doc["rounds"][-1]["round"], 1)
            self.assertEqual([e["host"] for e in doc["rounds"][-1]["excluded"]], ["node-3"])
        self.assertEqual(sorted(int(r) for r, _ in seen), [0, 1, 2, 3], seen)
        # node-3's launcher: left out, then told the job ended; its own status is its rank's.
        rc, out, err, doc = outs[3]
        self.assertEqual(rc, 128 + 7, err[-3000:])
        self.assertIn("this node is left out of round 1", err)
        self.assertRegex(err, r"the job ended with exit status 0 on node-[12] .* while this node "
                              r"was left out of round 1 \(rank \d+ \[node-3-1\] was killed by SIGBUS")
        self.assertNotIn("round 1 rank", out)
        self.assertIn("was killed by SIGBUS", doc["attempts"][0]["node_fault"])

    def test_a_fixed_node_count_keeps_the_node_and_stops_with_a_verdict(self):
        outs = self.job("3", restarts=1)
        for i in (1, 2, 3):
            rc, out, err, _ = outs[i]
            self.assertNotEqual(rc, 0, f"node-{i}: " + err[-3000:])
            self.assertRegex(err, r"not excluding node-3 \(launcher pid \d+\) from round 1: rank "
                                  r"\d+ \[node-3-1\] was killed by SIGBUS, a signal it did not ask "
                                  r"for; leaving it out would leave fewer than --nnodes 3 nodes")
        self.assertEqual(outs[3][0], 128 + 7)

    def test_a_python_error_on_a_node_leaves_no_node_out(self):
        outs = self.job("2:3", bad_how="raise")
        for i in (1, 2, 3):
            rc, out, err, doc = outs[i]
            self.assertNotIn("excluding", err, f"node-{i}: " + err[-3000:])
            self.assertNotEqual(rc, 0)
            self.assertIsNotNone(doc, f"node-{i} ({rc}): " + err[-3000:])
            self.assertTrue(all(a["node_fault"] is None for a in doc["attempts"]), doc["attempts"])
        err = outs[3][2]
        self.assertIn("the same error repeated in attempts 0 and 1", err, err[-3000:])


AGENT = r'''
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
print("round", os.environ["TORCHELASTIC_RESTART_COUNT"], "rank", dist.get_rank(), "of",
      dist.get_world_size(), os.environ["TORCHELASTIC_USE_AGENT_STORE"], os.environ["MASTER_PORT"],
      flush=True)
t = torch.ones(1)
dist.all_reduce(t)
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and dist.get_rank() == 1:
    raise SystemExit(3)
dist.barrier()
print("done", t.item(), flush=True)
'''


@unittest.skipUnless(have_torch(), "needs Debian's python3-torch")
class RoundsOnLoopback(unittest.TestCase):
    def test_a_torch_program_meets_in_the_agent_store_again_at_the_next_round(self):
        # The default rendezvous backend: the ranks' store is the endpoint's
        # (TORCHELASTIC_USE_AGENT_STORE=True), under /worker/attempt_<round>.
        d = write_scripts("gpudiag-rounds-", {"job.py": AGENT})
        self.addCleanup(shutil.rmtree, d, True)
        port = free_port()
        env = dict(clean_env(), PYTHON_EXEC=TORCH_PYTHON, GPUDIAG_SECRET="a" * 32,
                   OMP_NUM_THREADS="1")
        procs = [subprocess.Popen([BIN, "launch", "--nnodes", "2", "--nproc-per-node", "1",
                                   "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "agent",
                                   "--max-restarts", "1", "--grace", "1", f"{d}/job.py"],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = []
        for p in procs:
            try:
                outs.append(p.communicate(timeout=GUARD) + (p.returncode,))
            finally:
                p.kill()
        for out, err, rc in outs:
            self.assertEqual(rc, 0, err[-3000:])
            self.assertRegex(out, rf"round 1 rank [01] of 2 True {port}\n")
            self.assertIn("done 2.0", out)


class LateNodeOnLoopback(unittest.TestCase):
    def test_a_late_node_is_admitted_when_the_job_restarts_after_a_failure(self):
        # Round 0 closes with the first launcher alone; the second arrives late
        # and waits; the first's rank then fails, round 1 opens and admits both.
        port = free_port()
        node = ["--rdzv-endpoint", f"127.0.0.1:{port}", "--nnodes", "1:2", "--max-restarts", "1",
                "--grace", "0", "--rdzv-conf", "last_call_timeout=15", "--no-gpudiag", "--"]
        d = write_scripts("gpudiag-late-", {})
        self.addCleanup(shutil.rmtree, d, True)
        go = os.path.join(d, "go")
        os.mkfifo(go)
        script = (f'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then echo started; read x < {go}; '
                  'exit 1; fi; echo "round $TORCHELASTIC_RESTART_COUNT rank $RANK of $WORLD_SIZE '
                  'node $GROUP_RANK"')
        env = dict(clean_env(), GPUDIAG_SECRET="l" * 32)
        start = lambda: subprocess.Popen([BIN, "launch", *node, "sh", "-c", script], env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = start()
        self.addCleanup(first.kill)
        self.assertEqual(first.stdout.readline(), "[rank0]: started\n")  # round 0 closed, running
        late = start()
        self.addCleanup(late.kill)
        seen = ""
        while "waits for the next round" not in seen:  # the event: it waits
            line = late.stderr.readline()
            self.assertTrue(line, seen)
            seen += line
        with open(go, "w") as f:
            f.write("go\n")
        outs = [p.communicate(timeout=GUARD) + (p.returncode,) for p in (first, late)]
        for out, err, rc in outs:
            self.assertEqual(rc, 0, err[-3000:])
        ranks = sorted(re.findall(r"round 1 rank (\d) of 2 node (\d)", outs[0][0] + outs[1][0]))
        self.assertEqual(ranks, [("0", "0"), ("1", "1")], (outs[0][0], outs[1][0]))


if __name__ == "__main__":
    unittest.main()
