"""gpudiag under real SLURM daemons (one node, started by scripts/slurm-up.sh):
srun discovery, srun --mpi=pmix, and the sbatch examples in slurm/."""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

from harness import BIN, SOURCE_DIR, mpirun_env, ok_lines, require, run


def slurm_env():
    env = mpirun_env()
    env["SLURM_CONF"] = SlurmTests.conf
    env["GPUDIAG"] = BIN
    return env


class SlurmTests(unittest.TestCase):
    conf = None

    @classmethod
    def setUpClass(cls):
        for p in ("srun", "sbatch", "slurmctld", "slurmd", "munged"):
            require(p)
        if os.geteuid() != 0:
            raise unittest.SkipTest("starting slurmd needs root")
        p = run([os.path.join(SOURCE_DIR, "scripts", "slurm-up.sh")], timeout=120)
        if p.returncode != 0:
            raise AssertionError("slurm-up.sh failed: " + p.stderr)
        cls.conf = re.search(r"SLURM_CONF=(\S+)", p.stdout).group(1)

    def srun(self, *args, timeout=180):
        return run(["srun", *args], timeout=timeout, env=slurm_env())

    def test_srun_tasks_are_discovered_from_slurm(self):
        p = self.srun("-n", "2", BIN, "info", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        infos = [json.loads(b) for b in re.split(r"(?<=\})\s*(?=\{)", p.stdout.strip())]
        self.assertEqual(sorted(i["rank"] for i in infos), [0, 1])
        for i in infos:
            self.assertEqual(i["launcher"], "slurm")
            self.assertEqual(i["world_size"], 2)
            self.assertEqual(i["local_size"], 2)
            self.assertFalse(i["mpi_launched"])

    def test_srun_with_pmix_runs_the_check_over_mpi(self):
        p = self.srun("--mpi=pmix", "-n", "4", BIN, "check", "--size", "16MiB", "--iters", "1")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(p.stdout)), [0, 1, 2, 3])
        self.assertIn("backend=host/mpi", p.stdout)

    def test_plain_srun_meets_through_the_store(self):
        p = self.srun("-n", "3", BIN, "--log-level", "info", "check", "--size", "4MiB", "--iters", "1")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(p.stdout)), [0, 1, 2])
        self.assertIn("backend=host/tcp", p.stdout)
        self.assertIn("first host of the SLURM step", p.stderr)

    def test_bench_under_srun_reads_like_nccl_tests(self):
        from test_bench_nccl_tests import OPS, expected_row, parse
        for op, mpi in zip(OPS, ("none", "pmix") * 4):
            with self.subTest(op=op, mpi=mpi):
                p = self.srun(f"--mpi={mpi}", "-n", "3", BIN, "bench", op, "-b", "4K", "-e", "16K",
                              "-n", "1", "-w", "0")
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                rows, oob, verdict, avg = parse(p.stdout)
                self.assertEqual([(int(r[0]), int(r[1])) for r in rows],
                                 [expected_row(op, s, 3) for s in (4096, 8192, 16384)])
                in_place = "N/A" if op in ("alltoall", "sendrecv") else "0"  # as nccl-tests
                self.assertTrue(all(len(r) == 13 and r[8] == "0" and r[12] == in_place for r in rows),
                                rows)
                self.assertEqual((oob, verdict), (0, "OK"))
                self.assertGreater(avg, 0)
                self.assertIn("backend=host/mpi" if mpi == "pmix" else "backend=host/tcp", p.stdout)

    def test_field_parsers_read_all_reduce_perf_under_srun(self):
        # A node health check's own line, `srun all_reduce_perf -b 8 -e 32K -f 2 -g 1`,
        # read as field_parsers.py's scripts read it, with and without PMIx.
        from field_parsers import avg_busbw_shell, first_line_version, regex_rows, split_rows
        from test_bench_field_parsers import LINE, PERF, SIZES
        for mpi in ("none", "pmix"):
            with self.subTest(mpi=mpi):
                p = self.srun(f"--mpi={mpi}", "-n", "2", PERF, *LINE)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                rows = regex_rows(p.stdout)
                self.assertEqual([int(r[0]) for r in rows], SIZES, p.stdout)
                self.assertTrue(all(r[8] == "0" and r[12] == "0" for r in rows), rows)
                self.assertEqual(len(split_rows(p.stdout)), len(SIZES))
                self.assertGreater(avg_busbw_shell(p.stdout), 0)
                self.assertEqual(first_line_version(p.stdout), "2.19.6", p.stdout[:300])

    def sbatch(self, example, ntasks, env=None, args=("--size", "16MiB", "--iters", "1")):
        """Submits slurm/<example> as shipped, sized on sbatch's command line to one node
        and `ntasks` tasks, as root on a cluster without GPUs; returns its output. Nothing
        of the test's own environment helps it: no Open MPI root flags, no torchrun
        workaround (the script must bring what it needs)."""
        path = os.path.join(SOURCE_DIR, "slurm", example)
        env = dict(slurm_env(), **(env or {}))
        for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
            env.pop(k, None)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.txt")
            p = run(["sbatch", "--wait", "--nodes=1", f"--ntasks-per-node={ntasks}", "-o", out,
                     path, *args], timeout=300, env=env)
            with open(out) as f:
                return p, f.read()

    def test_the_scripts_ask_for_no_gpus_in_their_directives(self):
        # A cluster without GPU GRES refuses them ("Invalid generic resource"), and
        # #SBATCH lines expand no variables: GPUs are asked for on sbatch's line.
        for name in sorted(os.listdir(os.path.join(SOURCE_DIR, "slurm"))):
            with open(os.path.join(SOURCE_DIR, "slurm", name)) as f:
                directives = [l for l in f if l.startswith("#SBATCH")]
            self.assertTrue(directives, name)
            self.assertFalse([l for l in directives if re.search(r"--(gres|gpu|\w+-per-gpu)", l)], name)

    def test_sbatch_srun_example(self):
        p, out = self.sbatch("check-srun.sbatch", 2)
        self.assertEqual(p.returncode, 0, p.stderr + out)
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(out)), [0, 1], out)

    def test_sbatch_torchrun_example(self):
        if subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed.run"],
                          capture_output=True).returncode != 0:
            self.skipTest("Debian's python3-torch is not installed")
        # The script itself avoids torch 1.13's crash on Python 3.11 (torchrun's default
        # --redirects/--tee); GPUS_PER_NODE is its documented knob on a node without GPUs.
        p, out = self.sbatch("check-torchrun.sbatch", 1, env={"GPUS_PER_NODE": "2"})
        self.assertEqual(p.returncode, 0, p.stderr + out)
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(out)), [0, 1], out)

    def test_sbatch_mpirun_example_uses_open_mpi_inside_the_allocation(self):
        p, out = self.sbatch("check-mpirun.sbatch", 2)
        self.assertEqual(p.returncode, 0, p.stderr + out)
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(out)), [0, 1], out)
        self.assertIn("MPI Open MPI", out)

    def test_sbatch_link_test_example_measures_every_pair(self):
        p, out = self.sbatch("links-srun.sbatch", 3, args=("--link-size", "1MiB", "--iters", "3"))
        slow = "slow link" in out and "no slow link" not in out
        self.assertEqual(p.returncode, 1 if slow else 0, p.stderr + out)
        self.assertIn("link test: 3 ranks on 1 host, backend host/tcp", out)
        rows = [l for l in out.splitlines() if re.match(r"^\s+\d+ \S+\s+(-|[\d.]+)\s", l)]
        self.assertEqual(len(rows), 3, out)
        self.assertIn("same-host links: 3", out)

    def test_sbatch_sweep_as_shipped_on_one_node_says_no_pair_test_ran(self):
        with tempfile.TemporaryDirectory() as d:
            p, out = self.sbatch("sweep.sbatch", 2, env={"SWEEP_DIR": d}, args=())
            self.assertEqual(p.returncode, 0, p.stderr + out)
            self.assertIn("no pair test ran: one node has no partner node to pair with", out)
            self.assertIn("no node to exclude: every one of the 1 node(s) passed", out)
            excl = [f for f in os.listdir(d) if f.endswith(".exclude")]
            self.assertEqual(len(excl), 1, os.listdir(d))
            with open(os.path.join(d, excl[0])) as f:
                self.assertEqual(f.read().strip(), "")

    def test_sbatch_sweep_names_the_nodes_that_never_came_in_a_list_slurm_reads(self):
        # The pool is this node and two that never start a task: both are MISSING,
        # and the exclude list is one SLURM itself expands back to those two.
        node = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
        with tempfile.TemporaryDirectory() as d:
            p, out = self.sbatch("sweep.sbatch", 2, env={"SWEEP_DIR": d},
                                 args=("--backend", "host", "--hosts", f"{node},ghost[08-09]"))
            self.assertEqual(p.returncode, 1, p.stderr + out)
            files = sorted(os.listdir(d))
            self.assertEqual(len(files), 3, files)
            excl = [f for f in files if f.endswith(".exclude")][0]
            with open(os.path.join(d, excl)) as f:
                hostlist = f.read().strip()
            self.assertEqual(hostlist, "ghost[08-09]")
            names = run(["scontrol", "show", "hostnames", hostlist], env=slurm_env())
            self.assertEqual(names.stdout.split(), ["ghost08", "ghost09"], names.stderr)
            with open(os.path.join(d, excl.replace(".exclude", ".hosts"))) as f:
                self.assertEqual(f.read(), node + "\n")
            with open(os.path.join(d, excl.replace(".exclude", ".json"))) as f:
                doc = json.load(f)
        self.assertEqual(doc["schema"], "gpudiag-sweep/1")
        self.assertEqual({n["host"]: n["state"] for n in doc["nodes"]},
                         {node: "OK", "ghost08": "MISSING", "ghost09": "MISSING"})
        self.assertIn("exclude 2 of 3 node(s): ghost[08-09]", out)


if __name__ == "__main__":
    unittest.main()
