"""`gpudiag bench` takes nccl-tests' sweep flags (-b/--minbytes, -e/--maxbytes,
-f/--stepfactor, -i/--stepbytes, -n/--iters, -w/--warmup_iters, -T/--timeout)
with its size suffixes, measures the sizes they step through, and with one
rank says there is no bandwidth to measure instead of printing one."""

import json
import os
import re
import tempfile
import unittest

from harness import BIN, clean_env, run

ROW = re.compile(r"^(?:\[rank0\]: )?\s*(\d+(?:\.\d+)? (?:B|KiB|MiB|GiB))\s+\S+ \S+\s+(\S+)(?: GB/s)?\s+(\S+) GB/s")


def sizes(out):
    return [m.group(1) for m in map(ROW.match, out.splitlines()) if m]


class Sweep(unittest.TestCase):
    def bench(self, *args, nproc=2):
        p = run([BIN, "launch", "--nproc-per-node", str(nproc), "--", "bench", "--backend", "host",
                 "-n", "2", "-w", "1", "-T", "60", *args], env=clean_env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_a_step_factor_multiplies_the_size(self):
        self.assertEqual(sizes(self.bench("-b", "1K", "-e", "16K", "-f", "2")),
                         ["1 KiB", "2 KiB", "4 KiB", "8 KiB", "16 KiB"])
        self.assertEqual(sizes(self.bench("--minbytes", "1K", "--maxbytes", "64K", "-f", "4")),
                         ["1 KiB", "4 KiB", "16 KiB", "64 KiB"])

    def test_step_bytes_add_to_the_size(self):
        self.assertEqual(sizes(self.bench("-b", "1K", "-e", "7K", "-i", "2K")),
                         ["1 KiB", "3 KiB", "5 KiB", "7 KiB"])

    def test_one_rank_has_no_bandwidth_to_measure(self):
        with tempfile.TemporaryDirectory() as d:
            js = os.path.join(d, "bench.json")
            out = self.bench("-b", "1M", "-e", "2M", "--json", js, nproc=1)
            with open(js) as f:
                doc = json.load(f)
        rows = [m for m in map(ROW.match, out.splitlines()) if m]
        self.assertEqual([m.group(2) for m in rows], ["-", "-"], out)
        self.assertEqual([m.group(3) for m in rows], ["0.00", "0.00"], out)
        self.assertIn("one rank: an all-reduce moves no data between ranks", out)
        self.assertEqual([s["algbw_gbps"] for s in doc["sizes"]], [None, None])

    def test_a_factor_that_does_not_grow_is_one_line_and_exit_2(self):
        for args, says in ((["-f", "1"], "-f/--stepfactor 1 does not grow the size"),
                           (["-b", "4", "-e", "1G", "-i", "1"], "more than 4096 sizes")):
            p = run([BIN, "bench", "--backend", "host", *args], env=clean_env(), timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(says, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


if __name__ == "__main__":
    unittest.main()
