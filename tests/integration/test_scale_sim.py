"""The scale simulator (build/gpudiag-sim): thousands of simulated ranks
through every checkpoint, with one store and rank 0 judging (--flat) and with
node leaders under a tree of judges (the default), with ranks that never
arrive, stop and die, a leader that never reports and a group judge that dies
injected, and every one of them named by every rank that is still there; and
a node on another GPU driver (--drift-node) named in every rank's report, in
the tree only by comparing the groups' summaries at the root. The runs up to
102,400 ranks are in bench/scale.py (docs/BENCHMARKS.md)."""
import os
import re
import unittest

from harness import BUILD_DIR, run

SIM = os.path.join(BUILD_DIR, "gpudiag-sim")
LAST = re.compile(r"^sim: (?P<n>\d+) ranks, (?P<cps>\d+) checkpoints, (?P<s>[\d.]+) s, store peak RSS "
                  r"(?P<rss>\d+) MiB \(all stores (?P<all>\d+) MiB\), bytes through the store "
                  r"(?P<bytes>\d+), missing named: (?P<named>\d+)/(?P<of>\d+)$")


def sim(*args, timeout=60):
    p = run([SIM, *args], timeout=timeout)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p, LAST.match(last)


PER_RANK = re.compile(r"ranks<->leaders [\d.]+ MiB \((?P<rank>\d+) B a rank\), "
                      r"leaders<->parents [\d.]+ MiB \((?P<node>\d+) B a node\)")


@unittest.skipUnless(os.path.exists(SIM), "gpudiag-sim not built")
class ScaleSim(unittest.TestCase):
    def test_4096_ranks_flat_with_faults_are_named_and_bytes_grow_linearly(self):
        p, m = sim("--flat", "--ranks", "4096", "--missing", "3", "--stop", "2", "--die", "2",
                   "--timeout", "1")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertIsNotNone(m, p.stdout)
        self.assertEqual((m["n"], m["cps"], m["named"], m["of"]), ("4096", "5", "7", "7"))
        self.assertLess(float(m["s"]), 40)
        self.assertLess(int(m["rss"]), 1024)
        # O(n): each rank's record once in, once to the judge, a digest out;
        # 600-byte records, so well under 2 KiB per rank per checkpoint.
        self.assertLess(int(m["bytes"]), 4096 * 5 * 2048)

    def test_tree_names_missing_ranks_a_silent_leader_and_a_dead_group_judge(self):
        # 512 nodes of 8 in 8 groups of 64: 7 faulty ranks, a leader that never
        # reports (its 8 ranks) and a group judge that dies after the
        # communicator checkpoint (its own node's 8 ranks go with it; the other
        # 63 nodes of its group report to the root instead).
        p, m = sim("--ranks", "4096", "--group-nodes", "64", "--missing", "3", "--stop", "2",
                   "--die", "2", "--timeout", "1")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIsNotNone(m, p.stdout)
        self.assertEqual((m["n"], m["named"], m["of"]), ("4096", "23", "23"))
        self.assertIn("8 groups of 64 nodes", p.stderr)

    def test_bytes_per_rank_and_per_node_do_not_grow_with_the_job(self):
        per_rank, per_node, state = [], [], []
        for n in (512, 4096):
            p, m = sim("--ranks", str(n), "--group-nodes", "16", "--missing-leaders", "0",
                       "--dead-judges", "0")
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            b = PER_RANK.search(p.stderr)
            self.assertIsNotNone(b, p.stderr[-2000:])
            per_rank.append(int(b["rank"]))
            per_node.append(int(b["node"]))
            st = re.search(r"a rank's check state at most (\d+) KiB", p.stderr)
            self.assertIsNotNone(st, p.stderr[-2000:])
            state.append(int(st[1]))
        self.assertLess(per_rank[1], per_rank[0] * 1.1)
        self.assertLess(per_node[1], per_node[0] * 1.1)
        # A rank's own state grows by its list of live ranks (4 bytes a rank)
        # and nothing else: a slot per rank held hundreds of bytes a rank.
        self.assertLessEqual(state[1] - state[0], (4096 - 512) * 4 // 1024 + 4, state)

    def test_flat_bytes_per_rank_do_not_grow_with_the_job(self):
        per_rank = []
        for n in (256, 1024):
            p, m = sim("--flat", "--ranks", str(n))
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            per_rank.append(int(m["bytes"]) / n)
        self.assertLess(per_rank[1], per_rank[0] * 1.1)


    def test_a_drifting_node_is_named_by_every_rank_across_groups(self):
        # 512 nodes of 8 in 8 groups of 64; node 300 (group 4) on another
        # driver, with the default silent leader and dead group judge.
        p, m = sim("--ranks", "4096", "--group-nodes", "64", "--drift-node", "300",
                   "--missing", "2", "--timeout", "1")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIsNotNone(m, p.stdout)
        self.assertIn('"drift: simnode300 (ranks 2400-2407)" in the report of ', p.stderr)
        seen = re.search(r"in the report of (\d+)/(\d+) ranks at the exchange", p.stderr)
        self.assertIsNotNone(seen, p.stderr[-2000:])
        self.assertEqual(seen[1], seen[2])
        self.assertGreater(int(seen[2]), 4000)

    def test_a_drifting_node_is_named_flat_too(self):
        p, m = sim("--flat", "--ranks", "1024", "--drift-node", "7", "--missing", "1")
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIn('"drift: simnode7 (ranks 56-63)" in the report of 1023/1023 ranks',
                      p.stderr)

    @unittest.skipUnless(os.environ.get("GPUDIAG_SIM_16K", "1") == "1", "GPUDIAG_SIM_16K=0")
    def test_a_drifting_node_of_16384_ranks_in_16_groups(self):
        p, m = sim("--ranks", "16384", "--drift-node", "1234", "--timeout", "1", timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIn("16 groups of 128 nodes", p.stderr)
        self.assertRegex(p.stderr, r'"drift: simnode1234 \(ranks 9872-9879\)" in the report of '
                                   r'(\d+)/\1 ranks at the exchange')


class SimulatorValues(unittest.TestCase):
    def test_out_of_range_values_are_one_line_and_exit_2(self):
        for args, named in [(["--missing", "-1"], "--missing"), (["--record-bytes", "-5"], "--record-bytes"),
                            (["--timeout", "nan"], "--timeout"), (["--dead-judges", "-3"], "--dead-judges"),
                            (["--ranks", "16", "--missing", "16"], "leave some ranks"),
                            (["--drift-node", "-1"], "--drift-node"),
                            (["--ranks", "64", "--drift-node", "8"], "--drift-node 8"),
                            (["--flat", "--ranks", "64", "--drift-node", "8"], "--drift-node 8"),
                            # Node 129's leader never reports (the default silent leader).
                            (["--ranks", "2048", "--drift-node", "129"], "--drift-node 129")]:
            with self.subTest(args=args):
                p = run([SIM, *args], timeout=30)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(named, p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


if __name__ == "__main__":
    unittest.main()
