"""gpudiag launch running a real PyTorch training script (Debian's torch 1.13,
DDP over gloo) as torchrun runs it: the entry points (SCRIPT, -m MODULE,
--no-python PROGRAM), the same losses as torchrun, the children's
environment compared variable for variable with torchrun's children, and a
rank that raises through torch's @record named with its exception."""
import json
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import unittest

from harness import BIN, SOURCE_DIR, TORCH_PYTHON, clean_env, free_port, have_torch, run, strip_prefix

PYTHON = TORCH_PYTHON
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch")
TRAIN = os.path.abspath(os.path.join(FIXTURES, "train.py"))

# The variables torch 1.13's LocalElasticAgent._start_workers sets (and
# torch.distributed.run's OMP_NUM_THREADS), compared between the launchers.
COMPARED = ["LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
            "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
            "NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS"]


def env_without_threads():
    env = clean_env()
    env.pop("OMP_NUM_THREADS", None)
    env["PYTHON_EXEC"] = PYTHON  # the interpreter with torch, as torchrun's own override
    return env


def launch(*args, timeout=240, extra_env=None):
    env = env_without_threads()
    env.update(extra_env or {})
    return run([BIN, "launch", *args], env=env, timeout=timeout)


def torchrun(*args, timeout=240):
    # torch 1.13's default --redirects/--tee "0" does not parse under Python 3.11.
    return run([PYTHON, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2", *args],
               env=env_without_threads(), timeout=timeout)


def losses(out):
    return re.findall(r"step (\d+) loss ([\d.]+)", strip_prefix(out))


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class TrainingScriptUnderLaunch(unittest.TestCase):
    def test_script_and_module_give_torchruns_losses(self):
        ref = torchrun("--nproc_per_node", "2", "--master_port", str(free_port()), TRAIN,
                       "--steps", "6", "--lr", "0.05")
        self.assertEqual(ref.returncode, 0, ref.stderr[-3000:])
        expected = losses(ref.stdout)
        self.assertEqual(len(expected), 6, ref.stdout)
        p = launch("--nproc-per-node", "2", TRAIN, "--steps", "6", "--lr", "0.05")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr[-3000:])
        self.assertEqual(losses(p.stdout), expected)
        # -m: the module form, with its directory on PYTHONPATH.
        env = env_without_threads()
        env["PYTHONPATH"] = os.path.abspath(FIXTURES)
        p = run([BIN, "launch", "--nproc-per-node", "2", "-m", "train", "--steps", "6", "--lr",
                 "0.05"], env=env, timeout=240)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr[-3000:])
        self.assertEqual(losses(p.stdout), expected)
        # torchrun sets OMP_NUM_THREADS=1 for several ranks, and says so.
        self.assertIn("OMP_NUM_THREADS", p.stderr)

    def children_env(self, start, *launcher_args):
        with tempfile.TemporaryDirectory() as d:
            p = start(*launcher_args, TRAIN, "--steps", "1", "--dump-env", d)
            self.assertEqual(p.returncode, 0, (launcher_args, p.stdout, p.stderr[-3000:]))
            envs = {}
            for r in (0, 1):
                with open(os.path.join(d, f"env-{r}.json")) as f:
                    envs[r] = json.load(f)
            return envs

    def test_children_environment_matches_torchruns(self):
        # Under c10d (rank 0 serves torch's store) and under the static
        # rendezvous, torchrun's default (the launcher's store is the agent store).
        for backend in ("c10d", "static"):
            port = free_port()
            if backend == "c10d":
                t = self.children_env(torchrun, "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                                      "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "envcheck")
                g = self.children_env(launch, "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                                      "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "envcheck")
            else:
                t = self.children_env(torchrun, "--nproc_per_node", "2", "--master_port", str(port),
                                      "--rdzv_id", "envcheck")
                g = self.children_env(launch, "--nproc-per-node", "2", "--master-port", str(port),
                                      "--rdzv-id", "envcheck")
                self.assertEqual(g[0]["MASTER_PORT"], str(port))
            for r in (0, 1):
                for var in COMPARED:
                    self.assertEqual(g[r].get(var), t[r].get(var), (backend, r, var))
                # Each child its own error file, torchrun's layout under the run's folder.
                for e in (t[r], g[r]):
                    self.assertTrue(e["TORCHELASTIC_ERROR_FILE"].endswith(f"/attempt_0/{r}/error.json"),
                                    e["TORCHELASTIC_ERROR_FILE"])
            self.assertEqual(t[0]["TORCHELASTIC_USE_AGENT_STORE"], "True" if backend == "static" else "False")
            self.assertNotEqual(g[0]["TORCHELASTIC_ERROR_FILE"], g[1]["TORCHELASTIC_ERROR_FILE"])

    def test_torchs_store_client_gets_the_answers_torchruns_agent_gives(self):
        client = os.path.join(FIXTURES, "store_client.py")
        for name, start in [("torchrun", torchrun), ("launch", launch)]:
            p = start("--nproc-per-node" if name == "launch" else "--nproc_per_node", "3",
                      "--master-port" if name == "launch" else "--master_port", str(free_port()),
                      client)
            self.assertEqual(p.returncode, 0, (name, p.stdout, p.stderr[-3000:]))
            self.assertEqual(sorted(re.findall(r"store ok (\d)", p.stdout)), ["0", "1", "2"], name)

    def test_compare_set_wakes_a_wait_parked_on_its_key(self):
        p = launch("--nproc-per-node", "1", "--master-port", str(free_port()),
                   os.path.join(FIXTURES, "store_cas_wakes_wait.py"), timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr[-3000:])
        self.assertIn("cas woke the wait", p.stdout)

    def test_ranks_idle_in_a_collective_use_no_more_cpu_than_under_torchrun(self):
        # torch 1.13's client keeps a second, silent connection; a store that
        # drops it after 10 s left a thread of every rank spinning on the
        # closed socket (40-75% of a core). Rank 0 waits 15 s for rank 1.
        script = os.path.join(FIXTURES, "idle_wait.py")
        used = {}
        for name, start in [("torchrun", torchrun), ("launch", launch)]:
            p = start("--nproc-per-node" if name == "launch" else "--nproc_per_node", "2",
                      "--master-port" if name == "launch" else "--master_port", str(free_port()),
                      script, "idle", "15")
            self.assertEqual(p.returncode, 0, (name, p.stdout[-2000:], p.stderr[-3000:]))
            m = re.search(r"idle cpu ([\d.]+) s over ([\d.]+) s", p.stdout)
            self.assertIsNotNone(m, (name, p.stdout[-2000:]))
            self.assertGreater(float(m.group(2)), 12, m.group(0))
            used[name] = float(m.group(1))
        # A spinning thread costs seconds here; both should cost a fraction of one.
        self.assertLess(used["launch"], used["torchrun"] + 1.0, used)
        self.assertNotIn("no handshake within", p.stderr)

    def test_strangers_bytes_in_torchs_format_leave_the_store_serving(self):
        p = launch("--nproc-per-node", "1", os.path.join(FIXTURES, "hostile_torch_bytes.py"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr[-3000:])
        self.assertIn("hostile ok", p.stdout)

    def test_a_rank_that_raises_is_named_with_its_exception(self):
        p = launch("--nproc-per-node", "2", TRAIN, "--steps", "6", "--fail-rank", "1",
                   "--fail-step", "2")
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        m = re.search(r"gpudiag launch: root cause: rank (\d+) \[[^\]]+\] raised (.*)", p.stderr)
        self.assertIsNotNone(m, p.stderr[-3000:])
        self.assertEqual(m.group(1), "1")
        self.assertIn("ValueError: step 2 went wrong on rank 1", m.group(2))
        self.assertRegex(p.stderr, r"train\.py\", line \d+, in main")
        path = re.search(r"traceback: (\S+/error\.json)", p.stderr).group(1)
        with open(path) as f:
            self.assertIn("ValueError", json.load(f)["message"]["message"])
        # A gloo job runs no NCCL: its failure says nothing of NCCL's RAS.
        self.assertNotIn("NCCL RAS", p.stderr)


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class HangReport(unittest.TestCase):
    """Rank 1 sleeps at step 3 while the others wait in DDP's all-reduce."""

    def check_report(self, err, n):
        block = err[err.index("where the ranks are"):]
        self.assertIn("the others wait for rank 1\n", block)
        self.assertRegex(block, r"rank 1 \[[^\]]+-1\] is in train\.py:\d+ in main")
        others = "rank 0" if n == 2 else "ranks " + ",".join(str(r) for r in range(n) if r != 1)
        self.assertRegex(block, others + r"( \[[^\]]+\])? waits? in \w+ \(.*\) from train\.py:\d+ in main")
        files = re.search(r"full stacks in (\S+):", block).group(1)
        self.assertEqual(sorted(os.listdir(files)), sorted("rank%d.txt" % r for r in range(n)))

    def test_hang_timeout_names_the_rank_the_others_wait_for(self):
        for n in (2, 4):
            p = launch("--nproc-per-node", str(n), "--hang-timeout", "5", TRAIN, "--steps", "8",
                       "--hang-rank", "1", "--hang-step", "3")
            self.assertEqual(p.returncode, 3, p.stderr[-3000:])
            self.check_report(p.stderr, n)
            self.assertIn("stopped by --hang-timeout 5 s", p.stderr)

    def test_a_rank_spinning_in_a_busy_loop_is_named_too(self):
        # CPU time is not progress: rank 1 burns a core where it is.
        p = launch("--nproc-per-node", "2", "--hang-timeout", "6", TRAIN, "--steps", "8",
                   "--spin-rank", "1", "--spin-step", "3")
        self.assertEqual(p.returncode, 3, p.stderr[-3000:])
        block = p.stderr[p.stderr.index("where the ranks are"):]
        self.assertIn("the others wait for rank 1\n", block)
        self.assertIn("stopped by --hang-timeout 6 s", p.stderr)

    def test_a_slow_quiet_healthy_job_is_not_stopped(self):
        # 3 s steps, nothing printed, --hang-timeout 6: each step's all-reduce
        # moves the process group on, which is progress.
        p = launch("--nproc-per-node", "2", "--hang-timeout", "6", TRAIN, "--steps", "5",
                   "--step-seconds", "3", "--quiet")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertNotIn("where the ranks are", p.stderr)

    def test_sigusr1_prints_where_the_ranks_are_and_the_job_goes_on(self):
        proc = subprocess.Popen([BIN, "launch", "--nproc-per-node", "2", TRAIN, "--steps", "8",
                                 "--hang-rank", "1", "--hang-step", "3"],
                                env=env_without_threads(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stderr], daemon=True).start()
        try:
            # The event, not a guess: rank 1 says it is about to sleep.
            for line in proc.stdout:
                if "rank 1 sleeping at step 3" in line:
                    break
            # Rank 0 reaches the all-reduce on its own time: ask again until a
            # report shows it waiting there (each report is an event of its own).
            for attempt in range(30):
                proc.send_signal(signal.SIGUSR1)
                block = ""
                while not re.search(r"\n  rank 0 .*\n", block):
                    line = lines.get(timeout=60)
                    if "where the ranks are (SIGUSR1)" in line:
                        block = line
                    elif block:
                        block += line
                if "rank 0 [" in block and " waits in " in block:
                    break
            self.assertIsNone(proc.poll())  # the job goes on
            self.check_report(block, 2)
        finally:
            proc.kill()
            proc.communicate()


@unittest.skipUnless(have_torch() and os.geteuid() == 0,
                     "needs Debian's python3-torch and root (network namespaces)")
class HangAcrossNodes(unittest.TestCase):
    """Two network-namespace nodes of two ranks (scripts/netns-hosts.sh up): rank 2,
    on the second node, sleeps; the first node's launcher names it for the job."""
    PREFIX = "ghl"

    def test_the_first_node_names_the_rank_of_another_node(self):
        netns = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")
        p = run([netns, "up", self.PREFIX], timeout=60)
        if p.returncode != 0:
            self.skipTest("cannot create network namespaces here: " + p.stderr.strip())
        self.addCleanup(run, [netns, "down", self.PREFIX], timeout=60)
        port = 29000 + os.getpid() % 1000
        procs = []
        for node, side in ((0, "a"), (1, "b")):
            inner = (f"hostname node{side}; export GLOO_SOCKET_IFNAME={self.PREFIX}-v{side}; "
                     f"exec {BIN} launch --nnodes 2 --node-rank {node} --nproc-per-node 2 "
                     f"--master-addr 10.77.0.1 --master-port {port} --hang-timeout 8 {TRAIN} "
                     "--steps 8 --hang-rank 2 --hang-step 3")
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", f"{self.PREFIX}-{side}", "unshare", "--uts", "sh", "-c", inner],
                env=dict(env_without_threads(), GPUDIAG_SECRET="s" * 32),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = []
        for proc in procs:
            try:
                outs.append(proc.communicate(timeout=180))
            finally:
                proc.kill()
        err = outs[0][1]
        self.assertIn("every node's ranks", err, err[-3000:])
        block = err[err.index("where the ranks are"):]
        self.assertIn("the others wait for rank 2\n", block)
        self.assertRegex(block, r"rank 2 \[nodeb-0\] is in train\.py:\d+ in main")
        self.assertRegex(block, r"ranks 0,1,3 wait in \w+ \(.*\) from train\.py:\d+ in main")
        self.assertEqual(procs[0].returncode, 3, err[-2000:])


@unittest.skipUnless(have_torch() and os.geteuid() == 0,
                     "needs Debian's python3-torch and root (network namespaces)")
class ErrorAcrossNodes(unittest.TestCase):
    """Two network-namespace nodes of two ranks: rank 3 (local rank 1 of the
    second node) raises through torch's @record; that node's launcher names it
    with its exception, read from the error file torch wrote for local rank 1."""
    PREFIX = "gel"

    def test_a_rank_of_the_second_node_is_named_with_its_exception(self):
        netns = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")
        p = run([netns, "up", self.PREFIX], timeout=60)
        if p.returncode != 0:
            self.skipTest("cannot create network namespaces here: " + p.stderr.strip())
        self.addCleanup(run, [netns, "down", self.PREFIX], timeout=60)
        port = 28000 + os.getpid() % 1000
        procs = []
        for node, side in ((0, "a"), (1, "b")):
            inner = (f"hostname node{side}; export GLOO_SOCKET_IFNAME={self.PREFIX}-v{side}; "
                     f"exec {BIN} launch --nnodes 2 --node-rank {node} --nproc-per-node 2 "
                     f"--master-addr 10.77.0.1 --master-port {port} {TRAIN} "
                     "--steps 6 --fail-rank 3 --fail-step 2")
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", f"{self.PREFIX}-{side}", "unshare", "--uts", "sh", "-c", inner],
                env=dict(env_without_threads(), GPUDIAG_SECRET="s" * 32),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = []
        for proc in procs:
            try:
                outs.append(proc.communicate(timeout=180))
            finally:
                proc.kill()
        err = outs[1][1]
        m = re.search(r"gpudiag launch: root cause: rank (\d+) \[[^\]]+\] raised (.*)", err)
        self.assertIsNotNone(m, err[-3000:])
        self.assertEqual(m.group(1), "3", err[-3000:])
        self.assertIn("ValueError: step 2 went wrong on rank 3", m.group(2))
        path = re.search(r"traceback: (\S+/error\.json)", err).group(1)
        self.assertTrue(path.endswith("/1/error.json"), path)
        self.assertNotIn("wrote no error file", err)
        self.assertNotEqual(procs[1].returncode, 0)


FLOOD = r"""
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
held, opened = [], 0
for _ in range(n):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(b"\x06")  # a torch GETNUMKEYS: a torch client as far as the store can tell
        held.append(c)
        opened += 1
    except OSError:
        pass
print("opened", opened, flush=True)
sys.stdin.read()  # held until the test is done
"""


@unittest.skipUnless(have_torch() and os.geteuid() == 0, "needs Debian's python3-torch and root (setpriv)")
class OutsidersOnTheLaunchersStore(unittest.TestCase):
    def test_another_users_idle_torch_connections_cannot_keep_the_job_out(self):
        # User nobody opens 300 connections that speak torch's wire and then say
        # nothing, before the job's ranks connect: they count against nobody
        # (4 at most) and the job starts as if they were not there.
        port = free_port()
        d = tempfile.mkdtemp()
        gate = os.path.join(d, "go")
        job = subprocess.Popen([BIN, "launch", "--nproc-per-node", "2", "--master-port", str(port),
                                os.path.join(FIXTURES, "idle_wait.py"), "gate", gate],
                               env=env_without_threads(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            deadline = 60
            import socket
            import time
            t0 = time.monotonic()
            while True:  # the launcher's store is up when it accepts a connection
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=2).close()
                    break
                except OSError:
                    self.assertLess(time.monotonic() - t0, deadline, "the store never listened")
                    time.sleep(0.05)
            flood = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                      "/usr/bin/python3", "-c", FLOOD, str(port), "300"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            line = flood.stdout.readline()
            self.assertTrue(line.startswith("opened"), line)
            open(gate, "w").close()
            out, err = job.communicate(timeout=180)
            flood.stdin.close()
            flood.wait(30)
        finally:
            job.kill()
        self.assertEqual(job.returncode, 0, out[-2000:] + err[-3000:])
        self.assertEqual(sorted(re.findall(r"ok (\d)", out)), ["0", "1"], out)
        self.assertIn("is not a process of this job", err)


class EntryPoints(unittest.TestCase):
    def test_a_name_that_is_neither_file_nor_subcommand_gets_the_forms(self):
        p = run([BIN, "launch", "--nproc-per-node", "2", "no_such_train.py"], env=clean_env())
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("neither a file nor a gpudiag subcommand", p.stderr)
        self.assertIn("-m MODULE", p.stderr)

    def test_no_python_runs_the_program(self):
        p = run([BIN, "launch", "--nproc-per-node", "2", "--no-python", "sh", "-c",
                 "echo $ROLE_NAME $ROLE_RANK $TORCHELASTIC_USE_AGENT_STORE"], env=clean_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("[rank1]: default 1 True", p.stdout)  # the launcher's store is the agent store

    def test_gpudiag_run_as_a_torch_program_uses_the_store_in_torchs_protocol(self):
        # --no-python BIN check: the ranks are told the agent store exists
        # (TORCHELASTIC_USE_AGENT_STORE=True) and join it with torch's protocol.
        p = run([BIN, "launch", "--nproc-per-node", "2", "--no-python", BIN, "--log-level", "info",
                 "check", "--backend", "host", "--size", "64KiB", "--iters", "1"], env=clean_env())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("served by gpudiag launch, in torch's protocol", p.stdout + p.stderr)
        self.assertIn("-- SUBCOMMAND (not --no-python)", p.stdout + p.stderr)

    def test_subcommands_keep_their_short_form(self):
        p = run([BIN, "launch", "--nproc-per-node", "2", "--", "check", "--backend", "host",
                 "--size", "64KiB", "--iters", "1"], env=clean_env())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
