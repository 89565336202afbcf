"""MpiPlane's digest under real mpirun (src/plane/mpi_plane_test.cpp) at 4
and 8 ranks, flat, through node leaders (MpiTreePlane, "nodes" of 2 ranks) and
through group judges ("nodes" of 1 in groups of 2): every rank passes, and
rank 1's bytes per checkpoint are the same at both sizes."""
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


class MpiTreePlaneDigest(unittest.TestCase):
    def test_digest_through_node_leaders_at_4_and_8_ranks(self):
        seen = []
        for n in (4, 8):
            p = run(["mpirun", "-np", str(n), "--oversubscribe", TESTS,
                     "--gtest_filter=MpiTreePlaneDigest.*", "--gtest_color=no"], timeout=120,
                    env=mpirun_env())
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-2000:])
            self.assertEqual(p.stdout.count("[  PASSED  ] 1 test"), n, p.stdout[-3000:])
            seen.append(re.search(r"mpi-tree-plane-bytes rank 1: (\d+) (\d+)", p.stdout).groups())
        # A rank's bytes do not depend on the job's size.
        self.assertEqual(seen[0], seen[1])


class MpiTreePlaneGroups(unittest.TestCase):
    def test_group_judges_at_4_and_8_ranks(self):
        # "Nodes" of 1 rank in groups of 2 (src/plane/mpi_plane_test.cpp):
        # each group's judge reviews its nodes, rank 0 merges the reviews and
        # gets every record when it asks; a failure one rank announces
        # reaches every rank through the levels; a stopped leader is named.
        for n in (4, 8):
            p = run(["mpirun", "-np", str(n), "--oversubscribe", TESTS,
                     "--gtest_filter=MpiTreePlaneGroups.*", "--gtest_color=no"], timeout=180,
                    env=mpirun_env())
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-2000:])
            self.assertEqual(p.stdout.count("[  PASSED  ] 1 test"), n, p.stdout[-3000:])


class CheckThroughMpiNodeLeaders(unittest.TestCase):
    BIN = os.path.join(BUILD_DIR, "gpudiag")

    def test_a_check_through_node_leaders_under_mpirun(self):
        # 6 ranks as 3 "nodes" of 2 (GPUDIAG_MPI_NODE_SIZE stands in for
        # MPI_Comm_split_type's hosts): rank 0 hears 3 leaders, not 5 ranks.
        p = run(["mpirun", "-np", "6", "--oversubscribe", "-x", "GPUDIAG_TREE=on", "-x",
                 "GPUDIAG_MPI_NODE_SIZE=2", self.BIN, "check", "--backend", "host",
                 "--timeout", "20"], timeout=180, env=mpirun_env())
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-2000:])
        self.assertIn("summary: 6/6 ranks OK", p.stdout)
        rows = [line.split() for line in p.stdout.splitlines() if line[:1].isdigit()]
        self.assertEqual(len(rows), 6, p.stdout)
        for row in rows:  # rank 0's table has every rank's timings
            self.assertEqual(row[-1], "OK", row)
            self.assertNotIn("-", row[4:9], row)

    def test_a_bad_node_size_is_one_line_and_exit_2(self):
        p = run(["mpirun", "-np", "2", "--oversubscribe", "-x", "GPUDIAG_TREE=on", "-x",
                 "GPUDIAG_MPI_NODE_SIZE=lots", self.BIN, "check", "--backend", "host"],
                timeout=120, env=mpirun_env())
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("GPUDIAG_MPI_NODE_SIZE='lots' is not a number of ranks", p.stderr)


if __name__ == "__main__":
    unittest.main()
