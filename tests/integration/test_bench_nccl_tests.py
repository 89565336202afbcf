"""`gpudiag bench` read the way nccl-tests' consumers read all_reduce_perf and its
siblings: the rows between the out-of-place header and "# Out of bounds values",
13 whitespace-separated fields each, and the footer's last field. Every
collective under gpudiag launch, mpirun and (in test_slurm.py) srun; nccl-tests'
flags and size suffixes; a corrupted contribution seen as #wrong, FAILED and the
rank named; --json against the fields docs/json.md documents."""

import json
import os
import re
import tempfile
import unittest

from harness import BIN, SOURCE_DIR, clean_env, mpirun, require, run, strip_prefix

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"]
SIZES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2,
         "float": 4, "double": 8, "bfloat16": 2}


FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
          "broadcast": lambda n: 1, "reduce": lambda n: 1, "sendrecv": lambda n: 1}


def parse(out):
    """(rows, out-of-bounds count, OK|FAILED, average busbw) as a consumer reads them."""
    lines = strip_prefix(out).splitlines()
    start = next(i for i, l in enumerate(lines) if "out-of-place" in l and l.startswith("#"))
    end = next(i for i, l in enumerate(lines) if l.startswith("# Out of bounds values"))
    rows = [l.split() for l in lines[start + 1:end] if l.strip() and not l.startswith("#")]
    oob = lines[end].split()
    avg = next(l for l in lines if l.startswith("# Avg bus bandwidth")).split()[-1]
    return rows, int(oob[-2]), oob[-1], float(avg)


def expected_row(op, size, n, dtype="float"):
    """nccl-tests' (size, count) columns for -b/-e size `size` over n ranks."""
    es = SIZES[dtype]
    count = size // es
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        base = (count // n) & ~(16 // es - 1)
        return base * n * es, base
    return count * es, count


class Collectives(unittest.TestCase):
    def check_rows(self, out, op, n, sizes, dtype="float"):
        rows, oob, verdict, avg = parse(out)
        self.assertEqual(len(rows), len(sizes), out)
        for row, size in zip(rows, sizes):
            self.assertEqual(len(row), 13, row)
            want_bytes, want_count = expected_row(op, size, n, dtype)
            self.assertEqual((int(row[0]), int(row[1])), (want_bytes, want_count), row)
            self.assertEqual(row[2], dtype)
            self.assertEqual(row[3], "none" if op in ("all_gather", "alltoall", "broadcast") else "sum")
            self.assertEqual(row[8], "0", row)   # out-of-place #wrong
            # in-place #wrong; alltoall and sendrecv in place are not checked, as in
            # nccl-tests (reportErrors = in_place ? 0 : 1): their result is undefined there
            self.assertEqual(row[12], "N/A" if op in ("alltoall", "sendrecv") else "0", row)
            # algbw is the size over the time, busbw algbw times the operation's factor
            # (to the printed precision; no bound on the time itself, which load changes).
            for t, alg, bus in ((row[5], row[6], row[7]), (row[9], row[10], row[11])):
                self.assertGreater(float(t), 0, row)
                want_alg = want_bytes / (float(t) * 1e3)
                self.assertAlmostEqual(float(alg), want_alg, delta=0.006 + 0.02 * want_alg, msg=row)
                want_bus = want_alg * FACTOR[op](n)
                self.assertAlmostEqual(float(bus), want_bus, delta=0.006 + 0.02 * want_bus, msg=row)
        self.assertEqual((oob, verdict), (0, "OK"), out)
        self.assertGreater(avg, 0, out)

    def test_every_collective_under_launch(self):
        sizes = [1024, 4096, 16384, 65536]
        for op in OPS:
            with self.subTest(op=op):
                p = run([BIN, "launch", "--nproc-per-node", "3", "--", "bench", op, "--backend",
                         "host", "-b", "1K", "-e", "64K", "-f", "4", "-n", "2", "-w", "1"],
                        env=clean_env(), timeout=300)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.check_rows(p.stdout, op, 3, sizes)
                self.assertIn(f"# Collective test starting: {op}_perf", p.stdout)
                self.assertEqual(p.stdout.count("#  Rank "), 3, p.stdout)

    def test_every_collective_under_mpirun(self):
        require("mpirun")
        for op in OPS:
            with self.subTest(op=op):
                p = mpirun(2, "bench", f"{op}_perf", "-b", "8K", "-e", "32K", "-n", "2", "-w", "1",
                           "-d", "half")
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("backend=host/mpi", p.stdout)
                self.check_rows(p.stdout, op, 2, [8192, 16384, 32768], "half")

    def test_every_type_and_reduction_is_exact(self):
        p = run([BIN, "launch", "--nproc-per-node", "3", "--", "bench", "reduce_scatter",
                 "--backend", "host", "-b", "1K", "-e", "4K", "-f", "4", "-n", "1", "-w", "0",
                 "-d", "all", "-o", "all"], env=clean_env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows, oob, verdict, _ = parse(p.stdout)
        self.assertEqual(len(rows), 10 * 5 * 2)
        self.assertEqual({r[2] for r in rows}, set(SIZES))
        self.assertEqual({r[3] for r in rows}, {"sum", "prod", "max", "min", "avg"})
        self.assertEqual((oob, verdict), (0, "OK"), p.stdout)

    def test_every_root_with_minus_one(self):
        p = run([BIN, "launch", "--nproc-per-node", "3", "--", "bench", "broadcast", "--backend",
                 "host", "-b", "4K", "-e", "4K", "-r", "-1", "-n", "1"], env=clean_env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows, oob, _, _ = parse(p.stdout)
        self.assertEqual([r[4] for r in rows], ["0", "1", "2"])
        self.assertEqual(oob, 0)

    def test_a_corrupted_contribution_is_counted_and_its_rank_named(self):
        env = dict(clean_env(), GPUDIAG_TEST_CORRUPT="1")
        p = run([BIN, "launch", "--nproc-per-node", "3", "--", "bench", "--backend", "host",
                 "-b", "4K", "-e", "8K", "-n", "1", "-w", "0"], env=env, timeout=300)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        rows, oob, verdict, _ = parse(p.stdout)
        self.assertTrue(all(int(r[8]) > 0 and int(r[12]) > 0 for r in rows), rows)
        self.assertGreater(oob, 0)
        self.assertEqual(verdict, "FAILED")
        out = strip_prefix(p.stdout)
        self.assertRegex(out, r"# wrong on rank 0 \[[^\]]+\]: \d+ out of place, \d+ in place; first: element \d+")
        self.assertIn("rank 1", re.search(r"# wrong on rank 0 .*", out).group(0))

    def test_no_check_prints_na(self):
        p = run([BIN, "launch", "--nproc-per-node", "2", "--", "bench", "--backend", "host",
                 "-b", "4K", "-e", "4K", "-c", "0", "-n", "1"], env=clean_env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows, _, _, _ = parse(p.stdout)
        self.assertEqual((rows[0][8], rows[0][12], len(rows[0])), ("N/A", "N/A", 13))

    def test_one_rank_is_a_job_with_busbw_zero(self):
        p = run([BIN, "bench", "--backend", "host", "-b", "1M", "-e", "2M", "-n", "2"],
                env=clean_env(), timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows, oob, _, avg = parse(p.stdout)
        self.assertEqual([r[7] for r in rows], ["0.00", "0.00"])
        self.assertEqual((oob, avg), (0, 0.0))


class Flags(unittest.TestCase):
    def sizes(self, *args):
        p = run([BIN, "launch", "--nproc-per-node", "2", "--", "bench", "--backend", "host",
                 "-n", "1", "-w", "0", *args], env=clean_env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return [int(r[0]) for r in parse(p.stdout)[0]]

    def test_step_factor_and_step_bytes(self):
        self.assertEqual(self.sizes("-b", "1K", "-e", "16K", "-f", "2"),
                         [1024, 2048, 4096, 8192, 16384])
        self.assertEqual(self.sizes("--minbytes", "1K", "--maxbytes", "64K", "--stepfactor", "4"),
                         [1024, 4096, 16384, 65536])
        self.assertEqual(self.sizes("-b", "1K", "-e", "7K", "-i", "2K"), [1024, 3072, 5120, 7168])

    def test_bad_values_are_one_line_and_exit_2(self):
        for args, says in ((["-f", "1"], "-f/--stepfactor 1 does not grow the size"),
                           (["-b", "4", "-e", "1G", "-i", "1"], "more than 4096 sizes"),
                           (["-d", "float128"], "unknown -d/--datatype 'float128'"),
                           (["-o", "xor"], "unknown -o/--op 'xor'"),
                           (["all_to_nowhere"], "unknown collective 'all_to_nowhere'"),
                           (["broadcast", "-r", "5"], "-r/--root 5 is not a rank of this job")):
            with self.subTest(args=args):
                p = run([BIN, "bench", "--backend", "host", *args], env=clean_env(), timeout=60)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(says, p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


def documented_fields(schema):
    """The field names docs/json.md's table lists for `schema` (first column, backquoted)."""
    with open(os.path.join(SOURCE_DIR, "docs", "json.md")) as f:
        text = f.read()
    section = text.split(f"## `{schema}`", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for m in re.finditer(r"^\| `([a-z_.]+)`", section, re.M)}


class Json(unittest.TestCase):
    def test_json_file_holds_every_documented_field_and_no_other(self):
        # --json FILE: gpudiag's own document (-J writes nccl-tests' and carries
        # this one under "gpudiag": test_bench_field_parsers.py).
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "out.json")
            p = run([BIN, "launch", "--nproc-per-node", "2", "--", "bench", "all_gather",
                     "--backend", "host", "-b", "4K", "-e", "8K", "-n", "2", "--json", path],
                    env=clean_env(), timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(path) as f:
                doc = json.load(f)
        fields = documented_fields("gpudiag-bench/2")
        top = {f for f in fields if "." not in f}
        self.assertEqual(set(doc), top)
        self.assertEqual(doc["schema"], "gpudiag-bench/2")
        self.assertEqual(doc["collective"], "all_gather")
        documented = {f.split(".", 1)[1] for f in fields if f.startswith("results.")}
        for row in doc["results"]:
            self.assertLessEqual(set(row), documented)  # wrong_ranks only when some are wrong
            self.assertEqual(documented - set(row), {"wrong_ranks"})
            self.assertEqual(row["out_of_place"]["wrong"], 0)
            self.assertGreater(row["in_place"]["busbw_gbps"], 0)
            self.assertEqual(len(row["ranks"]), 2)
        self.assertEqual([r["size"] for r in doc["results"]], [4096, 8192])
        self.assertEqual(doc["out_of_bounds"], {"count": 0, "ok": True})


if __name__ == "__main__":
    unittest.main()
