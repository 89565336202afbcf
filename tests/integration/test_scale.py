"""Many ranks on this 2-core machine: 256 ranks of gpudiag check under
gpudiag launch meet in one store (256 concurrent clients), run the TCP ring
and all print OK."""
import os
import unittest

from harness import BIN, ok_lines, run


class Scale(unittest.TestCase):
    def test_256_ranks_under_launch(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "SLURM_"))}
        p = run([BIN, "launch", "--nproc-per-node", "256", "--no-prefix", "--", "check",
                 "--backend", "host", "--mem", "4KiB", "--size", "4KiB", "--iters", "0",
                 "--timeout", "120"], timeout=400, env=env)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        ranks = sorted(int(m["rank"]) for m in ok_lines(p.stdout))
        self.assertEqual(ranks, list(range(256)))
        self.assertIn("summary: 256/256 ranks OK", p.stdout)


if __name__ == "__main__":
    unittest.main()
