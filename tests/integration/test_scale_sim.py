"""The scale simulator (build/gpudiag-sim): 4096 simulated ranks through every
checkpoint against a real store, with ranks that never arrive, stop and die
injected, and every one of them named by every rank that is still there. The
16k-rank runs are in bench/scale.py (docs/BENCHMARKS.md)."""
import os
import re
import unittest

from harness import BUILD_DIR, run

SIM = os.path.join(BUILD_DIR, "gpudiag-sim")
LAST = re.compile(r"^sim: (?P<n>\d+) ranks, (?P<cps>\d+) checkpoints, (?P<s>[\d.]+) s, store peak RSS "
                  r"(?P<rss>\d+) MiB, bytes through the store (?P<bytes>\d+), missing named: "
                  r"(?P<named>\d+)/(?P<of>\d+)$")


def sim(*args, timeout=60):
    p = run([SIM, *args], timeout=timeout)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p, LAST.match(last)


@unittest.skipUnless(os.path.exists(SIM), "gpudiag-sim not built")
class ScaleSim(unittest.TestCase):
    def test_4096_ranks_with_faults_are_named_and_bytes_grow_linearly(self):
        p, m = sim("--ranks", "4096", "--missing", "3", "--stop", "2", "--die", "2",
                   "--timeout", "1")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertIsNotNone(m, p.stdout)
        self.assertEqual((m["n"], m["cps"], m["named"], m["of"]), ("4096", "5", "7", "7"))
        self.assertLess(float(m["s"]), 40)
        self.assertLess(int(m["rss"]), 1024)
        # O(n): each rank's record once in, once to the judge, a digest out;
        # 600-byte records, so well under 2 KiB per rank per checkpoint.
        self.assertLess(int(m["bytes"]), 4096 * 5 * 2048)

    def test_bytes_per_rank_do_not_grow_with_the_job(self):
        per_rank = []
        for n in (256, 1024):
            p, m = sim("--ranks", str(n))
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            per_rank.append(int(m["bytes"]) / n)
        self.assertLess(per_rank[1], per_rank[0] * 1.1)


if __name__ == "__main__":
    unittest.main()
