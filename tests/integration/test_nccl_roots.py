"""The NCCL communicator's bootstrap roots (GPUDIAG_NCCL_ROOTS, docs/gpu.md):
  - a value that is not auto or 1-64 is one line and exit 2 before any rank
    joins, from check and bench alike;
  - the ids of several roots reach every rank at the exchange, flat and
    through the tree of judges, in the scale simulator (build/gpudiag-sim
    --nccl-roots: the check's records, judges, reviews and assembly, without
    a GPU);
  - on a machine with 2 GPUs and NCCL 2.23+, a real check from 2 roots: the
    versions line says ncclCommInitRankScalable. Skipped, saying so,
    elsewhere."""
import json
import os
import re
import unittest

from harness import BIN, BUILD_DIR, clean_env, run

SIM = os.path.join(BUILD_DIR, "gpudiag-sim")
PER_RANK = re.compile(r"ranks<->leaders [\d.]+ MiB \((?P<rank>\d+) B a rank\)")
REACHED = re.compile(r"sim: NCCL bootstrap roots: (?P<roots>\d+) ids reached (?P<ok>\d+)/(?P<of>\d+) "
                     r"ranks at the exchange")


class RootsSetting(unittest.TestCase):
    def test_a_bad_value_is_one_line_and_exit_2(self):
        for cmd in (["check", "--backend", "host"], ["bench", "--backend", "host"]):
            for bad in ("0", "65", "many", "4\x1b[2J"):
                with self.subTest(cmd=cmd[0], value=bad):
                    env = clean_env()
                    env["GPUDIAG_NCCL_ROOTS"] = bad
                    p = run([BIN, *cmd], env=env, timeout=30)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn("GPUDIAG_NCCL_ROOTS=", p.stderr)
                    self.assertIn("1 to 64", p.stderr)
                    self.assertNotIn("\x1b", p.stderr)

    def test_auto_and_a_count_run_a_host_check(self):
        for value in ("auto", "4"):
            with self.subTest(value=value):
                env = clean_env()
                env["GPUDIAG_NCCL_ROOTS"] = value
                p = run([BIN, "check", "--backend", "host"], env=env, timeout=60)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


@unittest.skipUnless(os.path.exists(SIM), "gpudiag-sim not built")
class RootsReachEveryRank(unittest.TestCase):
    def reached(self, *args):
        p = run([SIM, *args], timeout=120)
        m = REACHED.search(p.stderr)
        self.assertIsNotNone(m, p.stderr[-3000:])
        return p, m

    def test_tree_of_judges_brings_every_roots_id_to_every_rank(self):
        # 256 nodes of 8 in 16 groups of 16: 8 roots made by ranks 0, 256,
        # ..., 1792, in 8 different groups; every rank's id list comes from its
        # digest (rank 0's record, and the root judge's merge of its groups').
        p, m = self.reached("--ranks", "2048", "--group-nodes", "16", "--nccl-roots", "8",
                            "--missing-leaders", "0", "--dead-judges", "0", "--timeout", "2")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual((m["roots"], m["ok"], m["of"]), ("8", "2048", "2048"))

    def test_uneven_roots_in_a_tree_without_groups(self):
        p, m = self.reached("--ranks", "120", "--per-node", "8", "--nccl-roots", "7",
                            "--missing-leaders", "0", "--dead-judges", "0", "--timeout", "2")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual((m["ok"], m["of"]), ("120", "120"))

    def test_flat_judge_brings_every_roots_id_to_every_rank(self):
        p, m = self.reached("--flat", "--ranks", "512", "--nccl-roots", "5", "--timeout", "2")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual((m["roots"], m["ok"], m["of"]), ("5", "512", "512"))

    def test_a_ranks_bytes_grow_by_the_ids_only_not_with_the_job(self):
        # Per rank and checkpoint, through the tree: 7 more roots' ids (~270 B
        # each) and rank 0's record (its id among it, ~1.2 KB escaped in the
        # digest) at the exchange, over 5 checkpoints: the digest carries
        # rank 0's record only where ranks ask for it (NCCL's, at the exchange).
        per_rank = {}
        for n in (512, 4096):
            for roots in ("0", "8"):
                p = run([SIM, "--ranks", str(n), "--group-nodes", "16", "--missing-leaders", "0",
                         "--dead-judges", "0", "--nccl-roots", roots], timeout=120)
                self.assertEqual(p.returncode, 0, p.stderr[-2000:])
                b = PER_RANK.search(p.stderr)
                self.assertIsNotNone(b, p.stderr[-2000:])
                per_rank[n, roots] = int(b["rank"])
        self.assertLess(per_rank[4096, "8"], per_rank[512, "8"] * 1.05)
        for n in (512, 4096):
            extra = per_rank[n, "8"] - per_rank[n, "0"]
            self.assertLess(extra, (7 * 280 + 1200 + 100) / 5, (n, per_rank))

    def test_values_out_of_range_are_one_line_and_exit_2(self):
        for args in (["--nccl-roots", "-1"], ["--nccl-roots", "65"], ["--ranks", "4", "--nccl-roots", "8"]):
            with self.subTest(args=args):
                p = run([SIM, *args], timeout=30)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn("--nccl-roots", p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_a_missing_root_maker_is_named_and_the_run_fails(self):
        # The leader of node 8 (ranks 64-71) never reports: rank 64, which
        # makes root 1 of 2, is missing, so no rank that is there gets that
        # root's id, and each says which root and rank.
        p, m = self.reached("--ranks", "128", "--nccl-roots", "2", "--missing-leaders", "1",
                            "--dead-judges", "0", "--timeout", "1")
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        self.assertEqual((m["ok"], m["of"]), ("0", "120"))
        self.assertIn("root 1 of 2 (made by rank 64) did not come with the exchange's digest",
                      p.stderr)


def gpus_and_scalable_nccl():
    p = run([BIN, "info", "--json", "-"], env=clean_env(), timeout=60)
    try:
        info = json.loads(p.stdout)
    except ValueError:
        return 0, False
    nccl = info.get("nccl", {})
    gpu = info.get("gpu") if isinstance(info.get("gpu"), dict) else {}
    count = gpu.get("visible_devices", 0) if isinstance(gpu.get("visible_devices"), int) else 0
    return count, bool(nccl.get("usable") and nccl.get("scalable_init"))


class RootsOnRealNccl(unittest.TestCase):
    def test_a_check_from_two_roots_on_two_gpus(self):
        gpus, scalable = gpus_and_scalable_nccl()
        if gpus < 2 or not scalable:
            self.skipTest(f"needs 2 GPUs and NCCL 2.23+ with ncclCommInitRankScalable (here: {gpus} "
                          f"GPUs, ncclCommInitRankScalable {'yes' if scalable else 'no'}); "
                          "scripts/gpu-check.sh runs the NCCL contract for it on a GPU")
        env = clean_env()
        env["GPUDIAG_NCCL_ROOTS"] = "2"
        p = run([BIN, "launch", "--nproc-per-node", "2", "--", "check", "--backend", "nccl"],
                env=env, timeout=240)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        self.assertIn("init ncclCommInitRankScalable with 2 roots", p.stdout)


if __name__ == "__main__":
    unittest.main()
