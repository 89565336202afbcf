"""The field's readers of nccl-tests (field_parsers.py) read gpudiag's bench
unchanged, called by nccl-tests' own command line (`all_reduce_perf -b 8 -e
32K -f 2 -g 1`, a link to gpudiag) under each launcher the field uses: mpirun,
torchrun --no-python, gpudiag launch (its report rows unprefixed) and, in
test_slurm.py, srun. Every flag nccl-tests accepts is accepted (never exit 2),
what gpudiag runs differently is said on one '# gpudiag:' line."""
import os
import subprocess
import unittest

from harness import BIN, BUILD_DIR, free_port, mpirun_env, run
from field_parsers import avg_busbw_shell, first_line_version, regex_rows, split_rows

PERF = os.path.join(BUILD_DIR, "all_reduce_perf")
LINE = ["-b", "8", "-e", "32K", "-f", "2", "-g", "1"]
SIZES = [8 << i for i in range(13)]  # 8 B .. 32 KiB
PYTHON = "/usr/bin/python3"


class FieldParsers(unittest.TestCase):
    def read_like_the_field(self, out, n):
        rows = regex_rows(out)
        self.assertEqual(len(rows), len(SIZES), out)
        self.assertEqual([int(r[0]) for r in rows], SIZES)
        self.assertTrue(all(r[8] == "0" and r[12] == "0" for r in rows), rows)  # no wrong values
        self.assertEqual(len(split_rows(out)), len(SIZES))
        self.assertGreater(avg_busbw_shell(out), 0)
        self.assertEqual(first_line_version(out), "2.19.6", out[:300])

    def test_under_mpirun(self):
        p = run(["mpirun", "-np", "2", "--oversubscribe", PERF, *LINE], timeout=180, env=mpirun_env())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.read_like_the_field(p.stdout, 2)

    def test_under_gpudiag_launch(self):
        for cmd in ([BIN, "launch", "--nproc-per-node", "2", "--", "bench", *LINE],
                    [BIN, "launch", "--nproc-per-node", "2", "--no-gpudiag", "--", PERF, *LINE]):
            with self.subTest(cmd=cmd[4:6]):
                p = run(cmd, timeout=180)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.read_like_the_field(p.stdout, 2)

    @unittest.skipUnless(subprocess.run([PYTHON, "-c", "import torch.distributed.run"],
                                        capture_output=True).returncode == 0,
                         "Debian's python3-torch is not installed (install-deps.sh --test)")
    def test_under_torchrun(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_", "PMIX", "SLURM_", "GPUDIAG_"))}
        p = run([PYTHON, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2",
                 "--nproc_per_node", "2", "--master_port", str(free_port()), "--no_python",
                 PERF, *LINE], timeout=180, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.read_like_the_field(p.stdout, 2)

    def test_json_is_nccl_tests_own_at_the_keys_its_analyser_reads(self):
        # nccl-tests 2.19's tools/analyze_perf_json.py reads, of a -I 1 -J file:
        # version, config.iterations, config.aggregated_iterations,
        # config.per_iter_skip, results[].size and, per placement,
        # results[].{out_of_place,in_place}_per_iter.{avg_us, min_us, max_us,
        # p99_us, cv_pct, times_us, per_process_max_times_us}; times_us must be
        # the max over the process rows of each iteration.
        import json
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            cmd = [BIN, "launch", "--nproc-per-node", "3", "--", "bench", "-b", "1K", "-e", "4K",
                   "-n", "6", "-I", "1", "-K", "1", "-J", path]
            p = run(cmd, timeout=180)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn(f"# Writing JSON output to {path}", p.stdout)
            again = run(cmd, timeout=180)  # nccl-tests never overwrites: path.0
            self.assertIn(f"# Writing JSON output to {path}.0", again.stdout)
            with open(path) as f:
                doc = json.load(f)
        self.assertEqual(doc["version"], 3)
        for key in ("start_time", "args", "env", "nccl_version", "config", "results",
                    "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"):
            self.assertIn(key, doc)
        cfg = doc["config"]
        self.assertEqual((cfg["iterations"], cfg["aggregated_iterations"], cfg["per_iter_skip"]),
                         (6, 1, 1))
        self.assertEqual(cfg["per_iter_timing"], "true")  # nccl-tests' jsonBool writes strings
        self.assertEqual([dev["rank"] for dev in cfg["devices"]], [0, 1, 2])
        self.assertEqual([r["size"] for r in doc["results"]], [1024, 2048, 4096])
        for r in doc["results"]:
            self.assertEqual(set(r["out_of_place"]), {"time", "alg_bw", "bus_bw", "nwrong"})
            for key in ("out_of_place_per_iter", "in_place_per_iter"):
                it = r[key]
                rows = it["per_process_max_times_us"]
                self.assertEqual(len(rows), 3)  # every rank, every iteration
                self.assertTrue(all(len(row) == 6 for row in rows), rows)
                self.assertEqual(it["times_us"], [max(col) for col in zip(*rows)])
                self.assertEqual(it["skipped_iterations"], 1)
                self.assertLessEqual(it["min_us"], it["avg_us"])
                self.assertLessEqual(it["avg_us"], it["max_us"])
                self.assertEqual(it["max_us"], max(it["times_us"][1:]))
                self.assertGreaterEqual(it["cv_pct"], 0)
        self.assertEqual(doc["out_of_bounds"], {"count": 0, "okay": "true"})
        self.assertEqual(doc["gpudiag"]["schema"], "gpudiag-bench/2")  # gpudiag's own, under one key
        self.assertFalse([e for e in doc["env"] if e.startswith("GPUDIAG_SECRET=")
                          and "not shown" not in e], "the launcher's secret is in the file")

    def test_g_above_one_alone_runs_one_rank_per_gpu(self):
        # `all_reduce_perf -g 2` on one machine: one process driving 2 GPUs in
        # nccl-tests; here 2 ranks of one each, started by gpudiag itself.
        p = run([PERF, "-b", "1K", "-e", "4K", "-g", "2", "--backend", "host"], timeout=180)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("# gpudiag: -g 2 in one process: run as 2 ranks of one GPU each", p.stdout)
        self.assertEqual(p.stdout.count("#  Rank "), 2, p.stdout)
        self.assertEqual(len(regex_rows(p.stdout)), 3)
        # The parameters line says what nccl-tests' would: the job ran 2 GPUs.
        self.assertRegex(p.stdout, r"# nThread 1 nGpus 2 minBytes 1024 ")
        # Every line that is not a row is a comment, the fingerprint's included:
        # parsers of nccl-tests' text skip '#' lines and read the rest as rows.
        for line in p.stdout.splitlines():
            if line.strip() and not line.startswith("#"):
                self.assertRegex(line, r"^\s+\d+\s+\d+\s", line)

    def test_every_flag_nccl_tests_accepts_runs(self):
        flags = [("-t", "1"), ("-g", "1"), ("-m", "2"), ("-N", "2"), ("-p", "1"), ("-y", "1"),
                 ("-G", "4"), ("-C", "1"), ("-S", "1"), ("-R", "1"), ("-x", "1"), ("-D", "1"),
                 ("-V", "8"), ("-M", "1"), ("-u", "3"), ("-I", "1"), ("-K", "1"), ("-z", "2"),
                 ("-z", "3"), ("-a", "3"), ("-T", "60")]
        for flag, value in flags:
            with self.subTest(flag=flag, value=value):
                p = run([PERF, "-b", "1K", "-e", "2K", "--backend", "host", flag, value], timeout=120)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertEqual(len(regex_rows(p.stdout)), 4 if flag == "-N" else 2, p.stdout)
        # What gpudiag runs differently is said, once, where the report is read.
        p = run([PERF, "-b", "1K", "-e", "1K", "--backend", "host", "-G", "4"], timeout=120)
        self.assertIn("# gpudiag: -G 4: CUDA graphs are not used; each iteration is a plain call",
                      p.stdout)
        self.assertIn("graph: 0", p.stdout)  # the parameters line says what ran


if __name__ == "__main__":
    unittest.main()
