"""MpiPlane's digest under real mpirun (src/rendezvous/mpi_plane_test.cpp) at 4
and 8 ranks: every rank passes, and rank 1's bytes per checkpoint are the same
at both sizes."""
import os
import re
import unittest

from harness import BUILD_DIR, mpirun_env, run

TESTS = os.path.join(BUILD_DIR, "gpudiag_tests")


class MpiPlaneDigest(unittest.TestCase):
    def test_digest_at_4_and_8_ranks(self):
        seen = []
        for n in (4, 8):
            p = run(["mpirun", "-np", str(n), "--oversubscribe", TESTS,
                     "--gtest_filter=MpiPlaneDigest.*", "--gtest_color=no"], timeout=120, env=mpirun_env())
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-2000:])
            self.assertEqual(p.stdout.count("[  PASSED  ] 1 test"), n, p.stdout[-3000:])
            seen.append(re.search(r"mpi-plane-bytes rank 1: (\d+) (\d+)", p.stdout).groups())
        self.assertEqual(seen[0], seen[1])


if __name__ == "__main__":
    unittest.main()
