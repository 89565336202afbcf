"""Bytes per rank stay flat at every level of the tree as the job grows. The
scale simulator (build/gpudiag-sim) counts every request made to every store
(src/sim/sim_traffic.h): a line per level, "sim: traffic at level L (...): a
<member> B B in R requests, ... a <member>'s by checkpoint: b0 b1 b2 b3 b4,
else b5", a member being a rank at its node's store, a node's leader at its
group's, a group's judge at its supergroup's, and so on. Two sizes with three
levels of judges above the ranks' nodes (2 ranks a node, 16 children a
judge): 1,024 ranks (32 groups in 2 supergroups) and 4,096 (128 groups in 8),
with the simulator's faults at every level (missing ranks, a silent leader, a
dead group judge, and a dead supergroup judge whose host takes its first
group's judge with it). What a member moves at a checkpoint must not grow
with the job: a digest read by every rank that names a whole lost supergroup's
groups as missing (its group judges stuck reconnecting to the dead store
while the root's wait ran out) was 5 times larger at the all-reduce at the
larger size. Nor the requests a member makes there (polls and waits for its
parent's digest included: the waits above last as long as a level's slowest
child, and at 200 ms a look a supergroup judge's requests at the root grew
with the job), nor, in all, those of relays past a lost parent (a lost
judge's children reporting one level up: counted as members, they made the
root's 2 supergroups at 262,144 ranks look like 3,000 requests each). Byte
and request counts, never times. And four levels (8 children a judge, 8,192
ranks) with judges lost at three: nothing named beyond the absent ranks."""
import os
import re
import unittest

from harness import BUILD_DIR, run

SIM = os.path.join(BUILD_DIR, "gpudiag-sim")
LAST = re.compile(r"^sim: (?P<n>\d+) ranks, (?P<cps>\d+) checkpoints, [\d.]+ s, .*bytes through "
                  r"the store (?P<bytes>\d+), missing named: (?P<named>\d+)/(?P<of>\d+)$", re.M)
LEVEL = re.compile(r"^sim: traffic at level (?P<level>\d+) \((?P<stores>[^)]+)\): a (?P<member>[\w -]+?) "
                   r"(?P<b>\d+) B in (?P<req>[\d.]+) requests, .*; from past their parents "
                   r"(?P<past_b>\d+) B in (?P<past_req>[\d.]+) requests a checkpoint in all; "
                   r".*'s by checkpoint: (?P<cps>[\d ]+), else (?P<other>\d+)$", re.M)
PER_RANK = re.compile(r"ranks<->leaders [\d.]+ MiB \((?P<rank>\d+) B a rank\), "
                      r"leaders<->parents [\d.]+ MiB \((?P<node>\d+) B a node\)")
# --timeout 4: a healthy simulated rank on a busy 2-core machine (the suite runs two files at
# once) must not be late enough to be named missing; the lost judge stalled 10 s.
SHAPE = ["--per-node", "2", "--group-nodes", "16", "--missing", "3", "--timeout", "4"]
SIZES = (1024, 4096)


def simulate(n):
    p = run([SIM, "--ranks", str(n), *SHAPE], timeout=180)
    return p, LAST.search(p.stdout)


@unittest.skipUnless(os.path.exists(SIM), "gpudiag-sim not built")
class TrafficPerLevel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = {n: simulate(n) for n in SIZES}

    def test_every_absent_rank_is_named_at_both_sizes(self):
        for n, (p, m) in self.runs.items():
            with self.subTest(ranks=n):
                self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
                self.assertIsNotNone(m, p.stdout[-2000:])
                self.assertEqual(m["named"], m["of"])
                self.assertIn("2 levels of judges", p.stderr)  # groups and supergroups

    def test_what_a_member_moves_a_checkpoint_does_not_grow_at_any_level(self):
        levels = {}
        for n, (p, _) in self.runs.items():
            found = {int(x["level"]): x for x in LEVEL.finditer(p.stderr)}
            # The nodes', groups', supergroups' and root's stores.
            self.assertEqual(sorted(found), [0, 1, 2, 3], p.stderr[-3000:])
            levels[n] = found
        small, large = (levels[n] for n in SIZES)
        for level in range(4):
            a, b = small[level], large[level]
            what = f"level {level} ({a['stores']}), a {a['member']}"
            cps_a = [int(x) for x in a["cps"].split()]
            cps_b = [int(x) for x in b["cps"].split()]
            # Each checkpoint apart: one checkpoint's growth is not hidden by
            # the others. The waits' polls vary a little from run to run.
            for seq, (x, y) in enumerate(zip(cps_a, cps_b)):
                self.assertLessEqual(y, 1.4 * x + 200,
                                     f"{what}, checkpoint {seq}: {x} B at {SIZES[0]} ranks, "
                                     f"{y} B at {SIZES[1]}")
            self.assertLessEqual(int(b["b"]), 1.3 * int(a["b"]) + 200, what)

    def test_the_requests_a_member_makes_a_checkpoint_do_not_grow_at_any_level(self):
        levels = {n: {int(x["level"]): x for x in LEVEL.finditer(p.stderr)}
                  for n, (p, _) in self.runs.items()}
        small, large = (levels[n] for n in SIZES)
        for level in range(4):
            a, b = small.get(level), large.get(level)
            self.assertTrue(a and b, f"level {level}'s traffic line")
            what = f"level {level} ({a['stores']}), a {a['member']}'s requests a checkpoint"
            self.assertLessEqual(float(b["req"]), 1.5 * float(a["req"]) + 3,
                                 f"{what}: {a['req']} at {SIZES[0]} ranks, {b['req']} at {SIZES[1]}")
            # The lost judges' children: as many at both sizes (16 a judge).
            what = f"level {level} ({a['stores']}), from past their parents a checkpoint in all"
            self.assertLessEqual(float(b["past_req"]), 1.5 * float(a["past_req"]) + 20,
                                 f"{what}: {a['past_req']} at {SIZES[0]}, {b['past_req']} at {SIZES[1]}")
            self.assertLessEqual(int(b["past_b"]), 1.5 * int(a["past_b"]) + 2000, what)

    def test_a_lost_judge_costs_every_rank_a_small_digest_only(self):
        # At the all-reduce (checkpoint 2) a group judge's host and a
        # supergroup judge's host are gone: their children report one level
        # up, and a rank reads the few ranks lost with them. When the lost
        # supergroup's groups came after the root's deadline, every rank read
        # a digest naming their ranks and notes: 4-5 times a quiet checkpoint
        # (the barrier, 3).
        for n, (p, _) in self.runs.items():
            ranks = {int(x["level"]): x for x in LEVEL.finditer(p.stderr)}.get(0)
            self.assertIsNotNone(ranks, p.stderr[-3000:])
            cps = [int(x) for x in ranks["cps"].split()]
            with self.subTest(ranks=n):
                self.assertLessEqual(cps[2], 2.5 * cps[3], f"a rank's bytes by checkpoint: {cps}")
                self.assertNotIn("sim: warning:", p.stderr)

    def test_the_planes_and_leaders_own_counts_stay_flat(self):
        per = {}
        for n, (p, m) in self.runs.items():
            c = PER_RANK.search(p.stderr)
            self.assertIsNotNone(c, p.stderr[-2000:])
            per[n] = (int(c["rank"]), int(c["node"]), int(m["bytes"]) / n)
        (r0, k0, t0), (r1, k1, t1) = (per[n] for n in SIZES)
        self.assertLessEqual(r1, 1.15 * r0, per)
        self.assertLessEqual(k1, 1.15 * k0, per)
        self.assertLessEqual(t1, 1.15 * t0, per)


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(os.path.exists(SIM), "gpudiag-sim not built")
class LostJudgesAtSeveralLevels(unittest.TestCase):
    """8,192 ranks on 1,024 nodes, 8 children a judge: groups, supergroups,
    a level above them, the root. At the all-reduce the hosts of a group's
    judge, of a supergroup's and of a level-3 judge die. The root's own wait
    (--timeout 2 and a second a level) ends before the judge of level-3 group
    0 has heard from its lost supergroup's groups (it waits 8 s for them):
    that judge says it is busy, and the root waits for it. Before, the 4,096
    live ranks under it were named missing at the all-reduce and the barrier."""

    def test_nothing_is_named_beyond_the_absent_ranks(self):
        p = run([SIM, "--ranks", "8192", "--group-nodes", "8", "--missing", "3", "--timeout", "2"],
                timeout=300)
        m = LAST.search(p.stdout)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        self.assertIn("3 levels of judges", p.stderr)
        self.assertEqual(m["named"], m["of"])
        self.assertNotIn("sim: warning:", p.stderr)
