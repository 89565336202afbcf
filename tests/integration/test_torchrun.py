"""gpudiag check under Debian's real torchrun (python3 -m torch.distributed.run,
torch 1.13): with the static rendezvous the ranks join the agent's c10d
TCPStore; with --standalone rank 0 serves gpudiag's own store."""
import os
import subprocess
import time
import unittest

from harness import BIN, broken_lines, free_port, ok_lines, run

PYTHON = "/usr/bin/python3"


def have_torch():
    try:
        return subprocess.run([PYTHON, "-c", "import torch.distributed.run"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def torchrun(*args, timeout=180):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX", "SLURM_", "GPUDIAG_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    # torch 1.13's default --redirects/--tee of "0" does not parse under Python
    # 3.11 (IntFlag iteration skips 0); redirecting stderr to its log and teeing
    # it back keeps both streams on the console.
    return run([PYTHON, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2", *args],
               timeout=timeout, env=env)


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class UnderTorchrun(unittest.TestCase):
    def test_agent_store(self):
        p = torchrun("--no_python", "--nproc_per_node", "3", "--master_port", str(free_port()),
                     BIN, "--log-level", "info", "check", "--size", "4MiB", "--iters", "1")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(p.stdout)), [0, 1, 2])
        both = p.stdout + p.stderr
        self.assertEqual(both.count("joined the store at 127.0.0.1"), 3, both)
        self.assertIn("torchrun", both)

    def test_standalone_rank_zero_serves(self):
        p = torchrun("--standalone", "--no_python", "--nproc_per_node", "2", BIN,
                     "--log-level", "info", "check", "--size", "4MiB", "--iters", "1")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(p.stdout)), [0, 1])
        self.assertIn("serving the store", p.stdout + p.stderr)

    def test_info_sees_torchrun(self):
        p = torchrun("--standalone", "--no_python", "--nproc_per_node", "2", BIN, "info")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("launcher  torchrun via"), 2, p.stdout)

    def test_a_rank_that_fails_is_named_by_the_others(self):
        # CUDA_VISIBLE_DEVICES is irrelevant on the host backend; a bad --device
        # on one rank is not possible via torchrun, so make one rank's GPU check
        # fail by forcing the NCCL backend: every rank is broken, promptly.
        start = time.monotonic()
        p = torchrun("--standalone", "--no_python", "--nproc_per_node", "2", BIN, "check",
                     "--backend", "nccl", "--timeout", "30")
        self.assertLess(time.monotonic() - start, 60)
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(len(broken_lines(p.stdout)), 2, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
