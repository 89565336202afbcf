"""Whose RAS answer the launcher believes (issue 53). User `nobody` listens on
the job's RAS port first (NCCL would then find it taken) and serves the model
of NCCL's RAS (tests/ras_model) with a report that names the job's real rank
pids and puts rank 1 behind. The launcher's hang report must not use it: it
says that the process that answered is no rank of this job, names nobody
behind, and still stops the job as --timeout says. (A RAS of the job's own
user is used, and the report says who answered: test_ras.py.)

Real launcher and ranks (`sleep`), the model as a real process of another
user; it reads the ranks' pids from a file the test writes once the launcher
started them (an event, not a wait)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from harness import BIN, SOURCE_DIR, children_by_rank, clean_env, free_port

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# serve MODEL_DIR PORT PIDS_FILE: the RAS model, its job made at the first
# connection from the pids in PIDS_FILE (waited for), rank 1 behind.
SERVE = r'''
import os, sys, time
sys.path.insert(0, sys.argv[1])
import ras_scenarios
from ras_server import RasModel
port, pids_file = int(sys.argv[2]), sys.argv[3]
def job():
    until = time.monotonic() + 60
    while not os.path.exists(pids_file) and time.monotonic() < until:
        time.sleep(0.05)
    with open(pids_file) as f:
        pids = [int(x) for x in f.read().split()]
    return ras_scenarios.combo("2.28.9", pids=pids, behind_rank=1)
m = RasModel(job, port=port)
print("listening", flush=True)
sys.stdin.read()
m.close()
'''


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("runuser"), "needs root and runuser")
class RasOfAnotherUser(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpudiag-ras-")
        os.chmod(self.dir, 0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        model = os.path.join(self.dir, "model")
        shutil.copytree(os.path.join(SOURCE_DIR, "tests", "ras_model"), model)
        for root, dirs, files in os.walk(model):
            for n in dirs + files:
                os.chmod(os.path.join(root, n), 0o755)
        self.model = model

    def test_another_users_listener_on_the_ras_port_is_not_believed(self):
        port = free_port()
        pids_file = os.path.join(self.dir, "pids")
        server = subprocess.Popen(["runuser", "-u", "nobody", "--", PYTHON, "-c", SERVE, self.model,
                                   str(port), pids_file], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if server.stdout.readline().strip() != "listening":
                self.fail("the model did not start: " + server.communicate("")[1][-2000:])
            env = dict(clean_env(), NCCL_RAS_ADDR="127.0.0.1:%d" % port)
            p = subprocess.Popen([BIN, "launch", "--nproc-per-node", "2", "--timeout", "3",
                                  "--no-python", "sleep", "600"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            pids, until = {}, time.monotonic() + 60
            while len(pids) < 2 and time.monotonic() < until and p.poll() is None:
                pids = children_by_rank(p.pid)  # both ranks started: the event
            self.assertEqual(sorted(pids), [0, 1], p.stderr.read() if p.poll() is not None else "")
            with open(pids_file + ".tmp", "w") as f:
                f.write("%d %d\n" % (pids[0], pids[1]))
            os.chmod(pids_file + ".tmp", 0o644)
            os.rename(pids_file + ".tmp", pids_file)
            try:
                _, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                raise AssertionError("launch still running: " + p.communicate()[1][-3000:])
        finally:
            server.communicate("", timeout=60)
        self.assertEqual(p.returncode, 3, err[-3000:])
        lines = [l for l in err.splitlines() if "NCCL RAS at" in l]
        self.assertEqual(len(lines), 1, err[-3000:])
        self.assertIn("the process that answered is no rank of this job (its socket is uid %d's"
                      % int(subprocess.check_output(["id", "-u", "nobody"])), lines[0])
        self.assertIn("its answer is not used", lines[0])
        self.assertNotIn("behind: rank 1", err)
        self.assertIn("job still running after --timeout", err)


if __name__ == "__main__":
    unittest.main()
