"""The check's compute phase, end to end under `gpudiag launch` on the host
backend: every rank runs the same GEMMs (bf16, fp16, fp32) on its CPU and the
exchange compares their checksums.

- healthy: every rank OK, rank 0's one line `compute: ... checksums identical
  on 4 ranks (...)`, and the checksums are the arithmetic's own (the same
  values on every run and every machine: a change of the arithmetic shows here);
- GPUDIAG_TEST_RAISE=FLIP@compute:2 flips a bit of rank 2's results: exactly
  rank 2 is broken in compute, every other rank ends OK (a compute verdict is
  on that rank alone), rank 0's summary says `rank 2 broken in compute`, the
  launcher's exit status is 1;
- the known checksums (data/compute-checksums.json, whose host entry holds
  on every CPU) judge each rank on its own: one rank whose bit flipped is
  broken by them, two ranks that differ need no third, a healthy run of one
  or two ranks says it matches them;
- under mpirun the same, and every rank finalizes MPI;
- --no-compute skips the phase (and the flip with it);
- --json and --prometheus carry each rank's compute object and gauges.

Nothing sleeps: each run ends on its own, bounded by the harness' timeout."""
import json
import os
import re
import tempfile
import unittest

from harness import BIN, broken_lines, clean_env, mpirun, ok_lines, require, run, strip_prefix

CHECK = ["check", "--backend", "host", "--size", "1MiB", "--mem", "1MiB", "--iters", "2", "--timeout", "30"]
# The host backend's GEMMs (n = 64) on any x86-64 or other IEEE machine: bf16/fp16/fp32.
KNOWN = "5f9d572c004ce395/c3679d8467fa0810/9493cbb376284c09"


def read(path):
    with open(path) as f:
        return json.load(f) if path.endswith(".json") else f.read()


def launch(n, *extra, raise_=None):
    env = clean_env()
    if raise_:
        env["GPUDIAG_TEST_RAISE"] = raise_
    p = run([BIN, "launch", "--nproc-per-node", str(n), "--", *CHECK, *extra], env=env, timeout=240)
    return p, strip_prefix(p.stdout)


class Compute(unittest.TestCase):
    def test_healthy_ranks_agree_bit_for_bit(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "check.json")
            p, out = launch(4, "--json", path)
            self.assertEqual(p.returncode, 0, out + p.stderr[-3000:])
            self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(out)), [0, 1, 2, 3], out)
            lines = [l for l in out.splitlines() if l.startswith("compute:")]
            self.assertEqual(len(lines), 1, out)
            self.assertRegex(lines[0], r"^compute: bf16, fp16 and fp32 GEMM checksums identical on 4 ranks "
                                       r"\(CPU[^)]*, median [0-9.]+ [GT]FLOP/s\), [0-9.]+ m?s, "
                                       r"matching the known checksums; rate not judged \(host backend\)$")
            self.assertRegex(out, r"summary: 4/4 ranks OK")
            doc = read(path)
        self.assertTrue(doc["ok"])
        for r in doc["ranks"]:
            c = r["compute"]
            self.assertEqual((c["checksum"], c["agrees"], c["verdict"]), (KNOWN, True, "ok"), r["rank"])
            self.assertGreater(c["tflops"], 0)
            self.assertFalse(c["rate_judged"])
            self.assertNotIn("clocks", c)  # NVML's, on a GPU only
            self.assertIn("compute", r["seconds"])

    def test_a_flipped_bit_names_that_rank_alone(self):
        with tempfile.TemporaryDirectory() as d:
            path, prom = os.path.join(d, "check.json"), os.path.join(d, "check.prom")
            p, out = launch(4, "--json", path, "--prometheus", prom, raise_="FLIP@compute:2")
            self.assertEqual(p.returncode, 1, out + p.stderr[-3000:])
            self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(out)), [0, 1, 3], out)
            broken = broken_lines(out)
            self.assertEqual([m["local"] for m in broken], ["2"], out)
            self.assertRegex(broken[0]["reason"], r"^compute result differs from the known checksum of CPU[^(]*"
                                                  r"\(host backend, kernel v1\) \(bf16 GEMM, checksum [0-9a-f]{16}, "
                                                  r"known 5f9d572c004ce395\); 3 of 4 ranks of its model give the known one$")
            self.assertRegex(out, r"summary: 3/4 ranks OK on 1 host, [^\n]*; rank 2 broken in compute\n")
            self.assertRegex(out, r"\n2 +\S+ +2 +host +[0-9.]+ \S+ +FAILED .* BROKEN in compute\n")
            self.assertIn("compute: bf16, fp16 and fp32 GEMM checksums identical on 3 of 4 ranks", out)
            self.assertIn("; rank 2 differs from the known checksums", out)
            self.assertRegex(p.stderr, r"gpudiag launch: 3/4 ranks OK; rank 2 exited with status 1")
            doc, metrics = read(path), read(prom)
        by_rank = {r["rank"]: r for r in doc["ranks"]}
        self.assertEqual([by_rank[r]["status"] for r in range(4)], ["ok", "ok", "broken", "ok"])
        self.assertEqual(by_rank[2]["failed_phase"], "compute")
        self.assertEqual((by_rank[2]["compute"]["verdict"], by_rank[2]["compute"]["agrees"]), ("differs", False))
        for r in (0, 1, 3):
            self.assertEqual(by_rank[r]["compute"]["checksum"], KNOWN)
        self.assertEqual(doc["not_ok"], "rank 2 broken in compute")
        self.assertRegex(metrics, r'gpudiag_check_compute_agrees\{host="[^"]+",rank="2"\} 0\n')
        self.assertRegex(metrics, r'gpudiag_check_compute_agrees\{host="[^"]+",rank="0"\} 1\n')
        self.assertRegex(metrics, r'gpudiag_check_compute_tflops\{host="[^"]+",rank="3"\} \S+\n')
        self.assertNotIn("gpudiag_check_compute_slow", metrics)  # the host's rate is never judged

    def test_two_ranks_that_differ_the_known_checksums_name_the_bad_one(self):
        # Without the table both would be named (no majority of two); the
        # known checksums need no third.
        p, out = launch(2, raise_="FLIP@compute:1")
        self.assertEqual(p.returncode, 1, out + p.stderr[-3000:])
        self.assertEqual([m["rank"] for m in ok_lines(out)], ["0"], out)
        broken = broken_lines(out)
        self.assertEqual([m["local"] for m in broken], ["1"], out)
        self.assertIn("differs from the known checksum of CPU", broken[0]["reason"])
        self.assertIn("; 1 of 2 ranks of its model give the known one", broken[0]["reason"])
        self.assertNotIn("a third", out)
        self.assertRegex(out, r"summary: 1/2 ranks OK[^\n]*; rank 1 broken in compute\n")

    def test_one_rank_is_judged_by_the_known_checksums(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "check.json")
            p, out = launch(1, "--json", path, raise_="FLIP@compute:0")
            self.assertEqual(p.returncode, 1, out + p.stderr[-3000:])
            doc = read(path)
        broken = broken_lines(out)
        self.assertEqual([m["local"] for m in broken], ["0"], out)
        self.assertRegex(broken[0]["reason"], r"^compute result differs from the known checksum of CPU[^(]*"
                                              r"\(host backend, kernel v1\) \(bf16 GEMM, checksum [0-9a-f]{16}, "
                                              r"known 5f9d572c004ce395\)$")
        self.assertRegex(out, r"summary: 0/1 ranks OK[^\n]*; rank 0 broken in compute\n")
        self.assertIn("; rank 0 differs from the known checksums", out)
        c = doc["ranks"][0]["compute"]
        self.assertEqual((c["verdict"], c["agrees"], c["known"], c["kernel"]), ("differs", False, "differs", 1))

    def test_healthy_one_and_two_ranks_match_the_known_checksums(self):
        for n in (1, 2):
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "check.json")
                p, out = launch(n, "--json", path)
                self.assertEqual(p.returncode, 0, out + p.stderr[-3000:])
                doc = read(path)
            lines = [l for l in out.splitlines() if l.startswith("compute:")]
            self.assertEqual(len(lines), 1, out)
            self.assertIn("), " if n == 1 else "checksums identical on 2 ranks", lines[0])
            self.assertIn(", matching the known checksums; rate not judged (host backend)", lines[0])
            self.assertNotIn("nothing to compare with", lines[0])
            self.assertNotIn("a third", lines[0])
            for r in doc["ranks"]:
                c = r["compute"]
                self.assertEqual((c["checksum"], c["known"], c["agrees"], c["verdict"]), (KNOWN, "matches", True, "ok"))

    def test_under_mpirun_every_rank_finalizes(self):
        # The broken rank went through every collective: it and its peers
        # finalize MPI together (mpirun says so when a rank does not).
        require("mpirun")
        p = mpirun(4, *CHECK, env={"GPUDIAG_TEST_RAISE": "FLIP@compute:1"})
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr[-3000:])
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(p.stdout)), [0, 2, 3], p.stdout)
        self.assertEqual([m["local"] for m in broken_lines(p.stdout)], ["1"], p.stdout)
        self.assertRegex(p.stdout, r"summary: 3/4 ranks OK on 1 host, backend host/mpi, [^\n]*; rank 1 broken in compute\n")
        self.assertNotIn("exiting improperly", p.stdout + p.stderr)

    def test_no_compute_skips_the_phase(self):
        p, out = launch(2, "--no-compute", raise_="FLIP@compute:1")
        self.assertEqual(p.returncode, 0, out + p.stderr[-3000:])
        self.assertEqual(len(ok_lines(out)), 2, out)
        self.assertNotIn("compute:", out)

    def test_a_budget_of_seconds_is_kept(self):
        # --compute-seconds sets the phase's length: twice the default here,
        # measured by each rank itself (seconds.compute), on a loaded machine too.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "check.json")
            p, out = launch(2, "--compute-seconds", "0.6", "--json", path)
            self.assertEqual(p.returncode, 0, out + p.stderr[-3000:])
            doc = read(path)
        for r in doc["ranks"]:
            self.assertGreaterEqual(r["compute"]["seconds"], 0.6)
            self.assertTrue(all(part["repeats"] >= 2 for part in r["compute"]["parts"]))


if __name__ == "__main__":
    unittest.main()
