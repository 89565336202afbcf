"""gpudiag check and info under a real mpirun on this machine (no GPU)."""
import json
import os
import tempfile
import time
import unittest

from harness import BIN, broken_lines, mpirun, ok_lines, require, run


class CheckUnderMpirun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require("mpirun")

    def test_four_ranks_print_ok_versions_and_summary(self):
        with tempfile.TemporaryDirectory() as d:
            report = os.path.join(d, "job.json")
            p = mpirun(4, "check", "--size", "16MiB", "--iters", "1", "--json", report)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            oks = ok_lines(p.stdout)
            self.assertEqual(sorted(int(m["rank"]) for m in oks), [0, 1, 2, 3], p.stdout)
            self.assertTrue(all(m["size"] == "4" for m in oks))
            self.assertEqual(sorted(int(m["local"]) for m in oks), [0, 1, 2, 3])
            lines = p.stdout.splitlines()
            versions = [l for l in lines if l.startswith("versions: ")]
            self.assertEqual(len(versions), 1, p.stdout)
            # No GPU here: auto picks the host backend over MPI and says so.
            self.assertIn("backend=host/mpi", versions[0])
            self.assertIn("Open MPI", versions[0])
            self.assertIn("using the host/mpi backend", p.stderr)
            summary = [l for l in lines if l.startswith("summary: ")]
            self.assertEqual(len(summary), 1)
            self.assertIn("4/4 ranks OK", summary[0])
            rows = [l for l in lines if l.split()[:1] in (["0"], ["1"], ["2"], ["3"])]
            self.assertEqual(len(rows), 4, p.stdout)
            self.assertTrue(all(r.rstrip().endswith("OK") for r in rows), rows)
            with open(report) as f:
                job = json.load(f)
            self.assertTrue(job["ok"])
            self.assertEqual(job["world_size"], 4)
            self.assertEqual([r["rank"] for r in job["ranks"]], [0, 1, 2, 3])
            self.assertTrue(all(r["allreduce_busbw_gbps"] > 0 for r in job["ranks"]))
            self.assertNotIn("nccl_id", job["ranks"][0])

    def test_nccl_backend_without_gpu_is_broken_on_every_rank_promptly(self):
        start = time.monotonic()
        p = mpirun(4, "check", "--backend", "nccl", "--timeout", "60")
        elapsed = time.monotonic() - start
        self.assertNotEqual(p.returncode, 0)
        broken = broken_lines(p.stdout)
        self.assertEqual(len(broken), 4, p.stdout + p.stderr)
        for m in broken:
            self.assertRegex(m["reason"], r"no NVIDIA driver: libcuda.so.1 not found|no CUDA device|built without CUDA", m["reason"])
        self.assertEqual(ok_lines(p.stdout), [])
        # Every rank fails locally: nobody waits for the 60 s timeout.
        self.assertLess(elapsed, 30, f"took {elapsed:.1f}s")

    def test_nccl_debug_makes_one_run_directory_for_all_ranks(self):
        with tempfile.TemporaryDirectory() as d:
            run_dir = os.path.join(d, "logs")
            p = mpirun(2, "check", "--size", "4MiB", "--iters", "1", "--nccl-debug",
                       "--nccl-debug-dir", run_dir, "--log-level", "info")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            # A notice, at info level: nothing may be wrong.
            self.assertIn(f"info: --nccl-debug: NCCL logs of every rank go to {run_dir}", p.stderr)
            if "backend=host" in p.stdout:
                # No GPU here: auto chose the host backend, which never starts NCCL; it says
                # so once and removes the run directory it made, empty.
                self.assertEqual(p.stderr.count("--nccl-debug: NCCL is not used by the host/mpi "
                                                "backend; nothing to capture"), 1, p.stderr)
                self.assertFalse(os.path.exists(run_dir))
            else:
                self.assertTrue(os.path.isdir(run_dir))

    def test_nccl_debug_where_nccl_never_starts_leaves_nothing_to_read(self):
        # --backend nccl where NCCL cannot start (no GPU here, or the library
        # named does not exist): no log is written, so the report says there is
        # nothing to explain, points at no log folder, and leaves none behind.
        with tempfile.TemporaryDirectory() as d:
            run_dir = os.path.join(d, "logs")
            p = mpirun(2, "check", "--backend", "nccl", "--nccl-debug", "--nccl-debug-dir", run_dir,
                       env={"GPUDIAG_NCCL_LIB": os.path.join(d, "no-such-libnccl.so.2")})
            self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("--nccl-debug: no rank wrote an NCCL log", p.stdout + p.stderr)
            self.assertNotIn("gpudiag nccl-log " + run_dir, p.stdout)
            self.assertFalse(os.path.exists(run_dir), os.listdir(d))

    def test_nccl_debug_rejects_an_unknown_subsystem(self):
        p = mpirun(1, "check", "--nccl-debug", "--nccl-debug-subsys", "INIT,BOGUS")
        self.assertEqual(p.returncode, 2)
        self.assertIn("BOGUS", p.stderr)

    def test_info_shows_open_mpi_discovery(self):
        p = mpirun(2, "info", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        decoder = json.JSONDecoder()
        text, infos = p.stdout.strip(), []
        while text:
            obj, end = decoder.raw_decode(text)
            infos.append(obj)
            text = text[end:].strip()
        self.assertEqual(sorted(i["rank"] for i in infos), [0, 1])
        for i in infos:
            self.assertEqual(i["launcher"], "openmpi")
            self.assertEqual(i["world_size"], 2)
            self.assertEqual(i["local_size"], 2)
            self.assertIn("Open MPI", i["mpi"]["library"])
            self.assertIn("OMPI_COMM_WORLD_RANK", i["env"])

    def test_info_text_names_the_launcher(self):
        p = mpirun(2, "info")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("launcher  Open MPI (mpirun)"), 2, p.stdout)

    def test_stale_rank_under_mpirun_is_a_warning_naming_both(self):
        p = mpirun(2, "info", env={"RANK": "0", "WORLD_SIZE": "8"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("using Open MPI (mpirun) says rank 1/2", p.stdout)
        self.assertIn("rank 0/8", p.stdout)


class SingleProcess(unittest.TestCase):
    def test_check_without_launcher_is_one_ok_rank(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            env.pop(k, None)
        p = run([BIN, "check", "--size", "16MiB", "--iters", "1"], env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(len(ok_lines(p.stdout)), 1)
        self.assertIn("[", p.stdout.splitlines()[0])

    def test_bad_rank_variables_are_a_one_line_usage_error(self):
        env = dict(os.environ, RANK="4", WORLD_SIZE="4", LOCAL_RANK="0")
        p = run([BIN, "check"], env=env)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("rank 4 >= world size 4", p.stderr)

    def test_unknown_subcommand_suggests(self):
        p = run([BIN, "chek"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean 'check'", p.stderr)


if __name__ == "__main__":
    unittest.main()
