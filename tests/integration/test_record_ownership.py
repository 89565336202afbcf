"""Without a job secret, a record is only believed from the connection that
claimed its rank: the store takes a rank's keys (its hello, phase, claim and
checkpoint records) only from the first connection that claimed that rank,
announcements of failures only from ranks' own connections (and, under a
multi-node gpudiag launch, from the launchers), deaths only from launchers.

Ranks started by hand (no secret, store served by rank 0) wait at their first
checkpoint for their last rank, which starts only after the attack; an
outsider (user `nobody`) who computes the job token joins and tries to forge
each kind of record. Every forgery is refused (the attacker reads an ERROR
reply, 0x87 = 135) and the job ends all OK, the store having logged why. A
real duplicate RANK is still named, by the duplicate and by the report."""
import unittest

from harness import Ranks, broken_lines, free_port, rank_env
from test_hostile_store import ARGS, BY_HAND_TOKEN, BIN, Job, attack, ok_lines

REFUSED = "reply 135"


class RecordOwnership(unittest.TestCase):
    def setUp(self):
        self.job = Job()
        self.port = free_port()
        for r in (0, 1, 2):  # rank 3 comes after the attack
            self.job.start([BIN, *ARGS], rank_env(r, 4, self.port))

    def tearDown(self):
        self.job.close()

    def forge(self, rank, key, value, after="hello/2"):
        """As a client claiming `rank` ("-": none), once `after` exists, SETs `key`
        (or ADDs, for a value "+N"); returns the attacker's report."""
        return attack("write", self.port, BY_HAND_TOKEN, rank, after, key, value)

    def finish_all_ok(self):
        self.job.start([BIN, *ARGS], rank_env(3, 4, self.port))
        codes = self.job.finish()
        out, err = self.job.out(), self.job.err()
        self.assertEqual(codes, [0, 0, 0, 0], err[-3000:])
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(out)), [0, 1, 2, 3], out)
        self.assertIn("store: refusing a request of client", self.job.text(0, "err"))

    def test_an_outsider_cannot_announce_a_failure(self):
        self.assertIn(REFUSED, self.forge("-", "failures", "+1"))
        self.assertIn(REFUSED, self.forge("-", "failure/1", "failed\trank 1 failed: NVLink error"))
        self.finish_all_ok()

    def test_an_outsider_cannot_report_a_death(self):
        self.assertIn(REFUSED, self.forge("-", "dead/1", "1"))
        self.finish_all_ok()

    def test_an_outsider_cannot_claim_a_rank_for_itself_without_claiming_it(self):
        # The attack that made a healthy rank exit 2 with "duplicate RANK".
        self.assertIn(REFUSED, self.forge("-", "claim/3", "+1"))
        self.finish_all_ok()

    def test_a_connection_posing_as_a_rank_that_joined_cannot_write_its_records(self):
        for key, value in (("failures", "+1"), ("phase/1", "nvlink-broken"),
                           ("cp/0/1", '{"ok":false}'), ("hello/1", "pid 1 on elsewhere")):
            self.assertIn(REFUSED, self.forge(1, key, value, after="hello/1"))
        self.assertIn(REFUSED, self.forge(1, "cp/0/digest", "{}", after="hello/1"))
        self.finish_all_ok()
        self.assertIn("claims a rank another connection holds", self.job.text(0, "err"))

    def test_no_client_may_write_the_stores_own_keys(self):
        self.assertIn(REFUSED, self.forge("-", "server", "rank 9 [nowhere]"))
        self.assertIn(REFUSED, self.forge(2, "duplicates", "rank 2", after="hello/2"))
        self.finish_all_ok()


class RealDuplicate(unittest.TestCase):
    def test_a_duplicate_rank_is_named_by_itself_and_by_the_report(self):
        port = free_port()
        args = [a if a != "60" else "6" for a in ARGS]  # --timeout 6: rank 2 never comes
        ranks = Ranks([rank_env(r, 3, port) for r in (0, 1)], args)
        try:
            # The duplicate starts once ranks 0 and 1 hold their claims.
            attack("write", port, BY_HAND_TOKEN, "-", "hello/1", "unrelated", "x", outsider=False)
            dup = Ranks([rank_env(1, 3, port)], args)
            dup.wait(30)
            ranks.wait(30)
        finally:
            ranks.kill()
        self.assertEqual(dup.codes, [2], dup.err)
        self.assertIn("duplicate RANK=1", dup.err[0])
        self.assertEqual(ranks.codes, [3, 3], ranks.err)
        for m in broken_lines(ranks.stdout()):
            self.assertIn("rank 2", m["reason"])
            self.assertIn("a second connection claimed rank 1 (again, from 127.0.0.1:", m["reason"])


if __name__ == "__main__":
    unittest.main()
