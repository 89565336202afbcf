"""Many ranks on this 2-core machine: 128 ranks of gpudiag check under
gpudiag launch meet in one store (128 concurrent clients), run the TCP ring
and all print OK; rank 0's table past --table-rows is counts and the ranks
that are not OK, with every row in --table-file. (256 ranks pass too, 20 of
20 beside two busy loops, but beside four more and other builds a 256-rank
job's exchange can take longer than any fixed --timeout: docs/BENCHMARKS.md.)"""
import os
import tempfile
import unittest

from harness import BIN, ok_lines, run


class Scale(unittest.TestCase):
    def test_128_ranks_under_launch(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
        p = run([BIN, "launch", "--nproc-per-node", "128", "--no-prefix", "--", "check",
                 "--backend", "host", "--mem", "4KiB", "--size", "4KiB", "--iters", "0",
                 "--timeout", "120"], timeout=400, env=env)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        ranks = sorted(int(m["rank"]) for m in ok_lines(p.stdout))
        self.assertEqual(ranks, list(range(128)))
        self.assertIn("summary: 128/128 ranks OK", p.stdout)

    def test_a_table_past_its_rows_is_short_and_whole_in_its_file(self):
        # 24 ranks, rank 13 killed at the all-reduce; --table-rows 16.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
        env["GPUDIAG_TEST_RAISE"] = "SIGKILL@all-reduce:13"
        with tempfile.TemporaryDirectory() as d:
            table = os.path.join(d, "table.txt")
            p = run([BIN, "launch", "--nproc-per-node", "24", "--no-prefix", "--", "check",
                     "--backend", "host", "--mem", "4KiB", "--size", "4KiB", "--iters", "0",
                     "--timeout", "60", "--table-rows", "16", "--table-file", table],
                    timeout=400, env=env)
            self.assertNotEqual(p.returncode, 0, p.stderr[-3000:])
            self.assertIn("ranks by state: dead 1, stopped 23", p.stdout)
            rows = [l for l in p.stdout.splitlines() if l[:1].isdigit() and "  " in l]
            self.assertTrue(rows and rows[0].startswith("13 "), p.stdout[-3000:])  # the cause first
            self.assertIn(f"every rank's row in {table})", p.stdout)
            with open(table) as f:
                whole = f.read()
            self.assertEqual(sum(1 for l in whole.splitlines() if l[:1].isdigit()), 24, whole)


if __name__ == "__main__":
    unittest.main()
