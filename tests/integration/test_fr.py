"""End-to-end tests of `gpudiag fr` on flight-recorder dumps.

The fixtures (tests/fixtures/fr, SOURCES.md says how each was made) are dumps torch 2.11
wrote on one GPU and jobs with one injected fault each, laid out as torch's writer lays them
out. The tests look at what a user reads: the finding lines, whom they name, the exit status
and the JSON (schema gpudiag-fr/1).
"""
import filecmp
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("GPUDIAG_BIN", "build/gpudiag")
SRC = os.environ.get("GPUDIAG_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
FIX = os.path.join(SRC, "tests", "fixtures", "fr")


def fixture(*parts):
    return os.path.join(FIX, *parts)


def run(*args, timeout=60):
    return subprocess.run([BIN, "fr", *args], capture_output=True, text=True, timeout=timeout)


def report(*paths, codes=(0, 1)):
    r = run("--json", "-", *paths)
    if r.returncode not in codes:
        raise AssertionError(f"exit {r.returncode}: {r.stderr}")
    return r.returncode, json.loads(r.stdout), r.stderr


def kinds(rep):
    return [f["kind"] for f in rep["findings"]]


class Faults(unittest.TestCase):
    def test_a_rank_that_never_scheduled_the_collective(self):
        code, rep, text = report(fixture("a_missing"))
        self.assertEqual(code, 1)
        self.assertEqual(rep["schema"], "gpudiag-fr/1")
        self.assertEqual(rep["suspect_ranks"], [2])
        self.assertEqual(rep["no_dump_ranks"], [])
        self.assertEqual(kinds(rep), ["missing-ranks"])
        f = rep["findings"][0]
        self.assertEqual((f["group"], f["group_desc"], f["seq"], f["op"]),
                         ("0", "default_pg", 7, "nccl:all_reduce"))
        self.assertEqual(f["input_sizes"], [[1024]])
        self.assertEqual(f["input_dtypes"], ["Float"])
        self.assertEqual(f["ranks"], [2])
        self.assertEqual(f["states"], {"0": "started", "1": "started", "2": "not_scheduled",
                                       "3": "started"})
        self.assertIn("missing-ranks: group 0 (default_pg): seq 7 nccl:all_reduce [[1024]] Float: "
                      "ranks 0,1,3 started it; rank 2 never scheduled it\n", text)
        self.assertTrue(text.endswith("suspect ranks: 2\n"))

    def test_b_a_rank_whose_gpu_stopped(self):
        code, rep, text = report(fixture("b_gpu_stopped"))
        self.assertEqual(code, 1)
        self.assertEqual(rep["suspect_ranks"], [1])
        self.assertEqual(kinds(rep), ["gpu-stopped"])
        f = rep["findings"][0]
        self.assertEqual((f["seq"], f["ranks"], f["peers"]), (5, [1], [0, 2, 3]))
        self.assertEqual(f["states"]["1"], "scheduled")
        self.assertIn("seq 5 nccl:all_reduce [[1024]] Float: rank 1 queued it and never started "
                      "it; ranks 0,2,3 completed it", text)

    def test_c_cpu_kept_queueing_after_the_gpu_stopped(self):
        code, rep, text = report(fixture("c_queued_past"))
        self.assertEqual(code, 1)
        self.assertEqual(rep["suspect_ranks"], [3])
        self.assertEqual(sorted(kinds(rep)), ["gpu-stopped", "queued-far-past"])
        q = [f for f in rep["findings"] if f["kind"] == "queued-far-past"][0]
        self.assertEqual((q["ranks"], q["peers"], q["peers_completed"], q["seq"], q["op"]),
                         ([3], [0, 1, 2], 39, 10, None))
        self.assertIn("rank 3 queued up to seq 40 and completed only up to seq 9 while ranks 0-2 "
                      "completed up to seq 39", text)
        per = {r["rank"]: r for r in rep["groups"][0]["per_rank"]}
        self.assertEqual((per[3]["last_enqueued"], per[3]["last_completed"]), (40, 9))
        # A larger --lag than the gap leaves only gpu-stopped.
        r = run("--json", "-", "--lag", "32", fixture("c_queued_past"))
        self.assertEqual(kinds(json.loads(r.stdout)), ["gpu-stopped"])

    def test_d_a_healthy_job(self):
        code, rep, text = report(fixture("d_healthy"))
        self.assertEqual(code, 0)
        self.assertEqual((rep["suspect_ranks"], rep["no_dump_ranks"], rep["findings"]),
                         ([], [], []))
        self.assertEqual([g["name"] for g in rep["groups"]], ["0", "1"])
        self.assertEqual(rep["groups"][1]["ranks"], [0, 1])
        self.assertEqual(rep["groups"][1]["desc"], "tp_group")
        self.assertTrue(text.endswith("suspect ranks: none\n"))

    def test_e_missing_empty_and_cut_files(self):
        code, rep, text = report(fixture("e_partial"))
        self.assertEqual(code, 0)
        self.assertEqual(rep["no_dump_ranks"], [1, 2, 3])
        self.assertEqual(rep["suspect_ranks"], [])
        self.assertEqual([(u["rank"], u["problem"]) for u in rep["unread_files"]],
                         [(2, "empty"), (3, "truncated")])
        self.assertEqual(kinds(rep), ["no-dump"])
        self.assertIn("ranks 1-3 of 4 have no readable dump and are not judged", text)
        self.assertIn("no dump: ranks 1-3 (not judged)", text)

    def test_f_hostile_files_are_refused_and_nothing_runs(self):
        r = run(fixture("f_hostile"))
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.splitlines()
        self.assertIn("GLOBAL builtins.print", lines[0])
        self.assertNotIn("owned", r.stdout + r.stderr.replace("print", ""))
        self.assertIn("nested deeper than 64 levels", lines[1])
        self.assertIn("1152921504606846976", lines[2])
        self.assertIn("more than 4194304 values", lines[3])
        self.assertTrue(lines[-1].startswith("gpudiag: no readable flight-recorder dump"))

    def test_a_hostile_file_beside_good_ones_leaves_them_read(self):
        with tempfile.TemporaryDirectory() as d:
            for r in range(4):
                shutil.copy(fixture("a_missing", f"nccl_trace_rank_{r}"), d)
            shutil.copy(fixture("f_hostile", "nccl_trace_rank_0"),
                        os.path.join(d, "nccl_trace_rank_4"))
            code, rep, _ = report(d)
            self.assertEqual(code, 1)
            self.assertEqual(rep["suspect_ranks"], [2])
            self.assertEqual(rep["no_dump_ranks"], [4])
            self.assertEqual(rep["unread_files"][0]["problem"], "not-a-dump")

    def test_g_json_form_gives_the_pickles_answer(self):
        _, pick, _ = report(fixture("a_missing"))
        code, js, text = report(fixture("g_json"))
        self.assertEqual(code, 1)
        self.assertEqual(js["findings"], pick["findings"])
        self.assertEqual(js["dumps"][0]["format"], "json")


MESH_FAULTS = {"mesh_faults": [5, 10], "mesh_faults_json": [2, 13], "mesh_wrapped": [7, 8]}


class Mesh(unittest.TestCase):
    """16-rank TP/PP/DP jobs on a DeviceMesh (make_fixtures.py, mesh_jobs.py): two faulty
    ranks each, one whose GPU stopped and one whose CPU stopped; every other rank healthy."""

    def test_every_injected_rank_is_named_and_no_healthy_one(self):
        for folder, faulty in MESH_FAULTS.items():
            code, rep, text = report(fixture(folder))
            self.assertEqual(code, 1, folder)
            self.assertEqual(rep["suspect_ranks"], faulty, folder)
            healthy = [r for r in range(16) if r not in faulty]
            self.assertEqual(sorted(rep["waiting_ranks"] + rep["in_flight_ranks"]), healthy,
                             folder)
            lines = text.splitlines()
            self.assertTrue(lines[1].startswith("cause: "), (folder, lines[:3]))
            self.assertTrue(text.endswith("suspect ranks: %s\n" % ",".join(map(str, faulty))))
            for f in rep["findings"]:
                self.assertEqual(sorted(f["causes"] + f["waiting"] + f["in_flight"]),
                                 f["ranks"], folder)

    def test_the_stopped_gpu_and_the_held_cpu_each_get_their_finding(self):
        _, rep, text = report(fixture("mesh_faults"))
        causes = {(f["kind"], tuple(f["causes"]), tuple(f["group_ranks"]))
                  for f in rep["findings"] if f["causes"]}
        self.assertIn(("gpu-stopped", (5,), (4, 5)), causes)
        self.assertIn(("missing-ranks", (10,), (8, 10, 12, 14)), causes)
        self.assertIn("cause: rank 5: gpu-stopped: group 1 [4,5] (mesh_tp): seq 11 "
                      "nccl:all_reduce [[4, 2048, 4096]] BFloat16: rank 5 queued it and never "
                      "started it; rank 4 started it: the GPU stopped before this collective\n",
                      text)
        waits = {w["rank"]: w for w in rep["waits"]}
        self.assertEqual((waits[4]["group_ranks"], waits[4]["seq"], waits[4]["for"]),
                         ([4, 5], 11, [5]))
        self.assertIn("waiting: rank 4 waits in group 1 [4,5] (mesh_tp) at seq 11", text)

    def test_split_subgroups_sharing_a_name_are_apart_and_flagged(self):
        _, rep, text = report(fixture("mesh_healthy"))
        names = [g["name"] for g in rep["groups"]]
        self.assertEqual([names.count(n) for n in "0123"], [1, 8, 4, 8])
        tp = [g for g in rep["groups"] if g["name"] == "1"]
        self.assertEqual([g["ranks"] for g in tp], [[2 * k, 2 * k + 1] for k in range(8)])
        self.assertTrue(all(g["shared_name"] for g in tp))
        self.assertIn("note: group 1 (mesh_tp) is the name of 8 process groups with different "
                      "members (split_group or DeviceMesh subgroups): each is analysed apart\n",
                      text)

    def test_pg_status_of_a_pipeline_group_is_not_read_as_collectives(self):
        for folder in ("mesh_healthy", "mesh_wrapped"):
            _, rep, _ = report(fixture(folder))
            for g in rep["groups"]:
                self.assertEqual(g["carries_p2p"], g["name"] == "3", folder)
                used = {r["pg_status_used"] for r in g["per_rank"] if r["known"]}
                self.assertEqual(used, {g["name"] != "3"}, (folder, g["name"], g["ranks"]))
        # The pipeline groups of mesh_wrapped carry send/recv only: nothing to judge there.
        _, rep, _ = report(fixture("mesh_wrapped"))
        for g in rep["groups"]:
            if g["name"] == "3":
                self.assertEqual([r["last_enqueued"] for r in g["per_rank"] if r["known"]],
                                 [-1] * len([r for r in g["per_rank"] if r["known"]]))
                self.assertIsNone(g["waits_at"])

    def test_wrapped_ring_buffers_keep_24_entries(self):
        _, rep, _ = report(fixture("mesh_wrapped"))
        self.assertEqual({d["entries"] for d in rep["dumps"]}, {24})
        self.assertEqual(rep["dumps"][0]["format"], "pickle protocol 2")
        _, rep, _ = report(fixture("mesh_faults_json"))
        self.assertEqual({d["format"] for d in rep["dumps"]}, {"json"})

    def test_healthy_busy_and_skewed_jobs_have_no_suspect(self):
        for folder in ("mesh_healthy", "mesh_skewed"):
            code, rep, text = report(fixture(folder))
            self.assertEqual((code, rep["suspect_ranks"]), (0, []), (folder, text))
            self.assertNotIn("cause:", text)
            self.assertTrue(text.endswith("suspect ranks: none\n"))
        _, rep, _ = report(fixture("mesh_healthy"))
        self.assertEqual((rep["findings"], rep["waiting_ranks"], rep["waits"]), ([], [], []))


class RealDumps(unittest.TestCase):
    """Dumps torch 2.11.0 wrote on one H200 (one rank: NCCL takes one rank per GPU)."""

    def test_watchdog_timeout_file(self):
        code, rep, text = report(fixture("real", "watchdog_timeout"))
        self.assertEqual(code, 0)
        d = rep["dumps"][0]
        self.assertEqual((d["rank"], d["format"], d["version"], d["entries"], d["notes"]),
                         (0, "pickle protocol 2", "2.10", 2, []))
        w = rep["groups"][0]["waits_at"]
        self.assertEqual((w["seq"], w["op"], w["input_sizes"], w["input_dtypes"], w["states"]),
                         (2, "nccl:all_reduce", [[4096]], ["Half"], {"0": "scheduled"}))

    def test_pickle_and_json_of_one_moment_agree(self):
        _, p, _ = report(fixture("real", "queued_behind_kernel"))
        _, j, _ = report(fixture("real", "queued_behind_kernel_json"))
        self.assertEqual(p["groups"], j["groups"])
        self.assertEqual(p["groups"][0]["waits_at"]["input_dtypes"], ["BFloat16"])
        self.assertEqual(p["groups"][1]["desc"], "tp_group")

    def test_entries_counted_as_pythons_pickle_reads_them(self):
        for name in ("watchdog_timeout", "queued_behind_kernel", "completed", "status_trails"):
            path = fixture("real", name, "nccl_trace_rank_0")
            with open(path, "rb") as f:
                want = len(pickle.load(f)["entries"])  # torch's own dump: plain values only
            _, rep, _ = report(path)
            self.assertEqual(rep["dumps"][0]["entries"], want, name)


class Cli(unittest.TestCase):
    def test_json_file_and_text_on_stdout(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "fr.json")
            r = run(fixture("b_gpu_stopped"), "--json", out)
            self.assertEqual(r.returncode, 1)
            self.assertIn("gpu-stopped: group 0", r.stdout)
            with open(out) as f:
                self.assertEqual(json.load(f)["suspect_ranks"], [1])

    def test_files_by_name_and_twice(self):
        files = [fixture("a_missing", f"nccl_trace_rank_{r}") for r in (0, 1, 3)]
        code, rep, _ = report(*files, files[0])
        self.assertEqual([d["rank"] for d in rep["dumps"]], [0, 1, 3])
        self.assertEqual(rep["no_dump_ranks"], [2])  # from pg_config: never healthy
        self.assertEqual(kinds(rep), ["no-dump"])
        self.assertEqual(code, 0)

    def test_bad_usage(self):
        self.assertEqual(run().returncode, 2)
        r = run(fixture("no-such-dir"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot read", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "nccl_trace_rank_0")
            os.mkfifo(fifo)
            r = run(fifo)
            self.assertEqual(r.returncode, 2)
            self.assertIn("FIFO", r.stderr)
            with open(os.path.join(d, "notes.txt"), "w") as f:
                f.write("not a dump\n")
            r = run(d)  # the FIFO is skipped in a folder; notes.txt has no rank
            self.assertEqual(r.returncode, 2)
            self.assertIn("no-rank", r.stderr)

    def test_no_dump_written(self):
        with tempfile.TemporaryDirectory() as d:
            r = run(d)
            self.assertEqual(r.returncode, 2)
            self.assertEqual(r.stdout, "")
            self.assertTrue(r.stderr.startswith(
                f"gpudiag: no flight-recorder dump was written (no file in {d}); try: "), r.stderr)
            self.assertIn("TORCH_NCCL_DUMP_ON_TIMEOUT=1", r.stderr)
            for rank in (0, 1):
                open(os.path.join(d, f"nccl_trace_rank_{rank}"), "wb").close()
            r = run(d)
            self.assertEqual(r.returncode, 2)
            self.assertIn(f"gpudiag: no flight-recorder dump was written (2 empty file(s) in {d})",
                          r.stderr)

    def test_help(self):
        r = subprocess.run([BIN, "fr", "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        for words in ("--json", "--lag", "--max-file-size", "Exit status", "suspect"):
            self.assertIn(words, r.stdout)

    def test_an_unknown_version_is_read_with_a_note(self):
        with open(fixture("a_missing", "nccl_trace_rank_0"), "rb") as f:
            d = pickle.load(f)
        d["version"] = "3.0"
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(4):
                shutil.copy(fixture("a_missing", f"nccl_trace_rank_{r}"), tmp)
            with open(os.path.join(tmp, "nccl_trace_rank_0"), "wb") as f:
                pickle.dump(d, f, protocol=2)
            code, rep, text = report(tmp)
            self.assertEqual(code, 1)
            self.assertEqual(rep["suspect_ranks"], [2])  # read all the same
            self.assertEqual(rep["dumps"][0]["notes"],
                             ["version 3.0 is not one gpudiag knows (2.0 to 2.10): read as the "
                              "2.x layout"])
            self.assertIn("note: the dumps differ in version: 2.10 (ranks 1-3), 3.0 (rank 0)",
                          text)

    def test_names_from_a_dump_are_escaped(self):
        with open(fixture("a_missing", "nccl_trace_rank_0"), "rb") as f:
            d = pickle.load(f)
        for e in d["entries"]:
            e["process_group"] = ("0", "evil\x1b[2J\u202edesc")
            e["profiling_name"] = "nccl:all_reduce\x1b[31m"
        d["pg_config"]["0"]["desc"] = "evil\x1b[2J\u202edesc"
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(4):
                shutil.copy(fixture("a_missing", f"nccl_trace_rank_{r}"), tmp)
            with open(os.path.join(tmp, "nccl_trace_rank_0"), "wb") as f:
                pickle.dump(d, f, protocol=2)
            r = run(tmp)
            self.assertNotIn("\x1b", r.stdout)
            self.assertNotIn("\u202e", r.stdout)
            self.assertIn("group 0 (evil\\x1b[2J\\u202edesc)", r.stdout)
            self.assertIn("nccl:all_reduce\\x1b[31m", r.stdout)


class Generator(unittest.TestCase):
    def test_committed_fixtures_are_what_the_generator_writes(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(fixture("make_fixtures.py"), d)
            shutil.copy(fixture("mesh_jobs.py"), d)
            subprocess.run([sys.executable, os.path.join(d, "make_fixtures.py")], check=True,
                           timeout=120)
            for folder in ("a_missing", "b_gpu_stopped", "c_queued_past", "d_healthy",
                           "e_partial", "f_hostile", "g_json", *MESH_FAULTS, "mesh_healthy",
                           "mesh_skewed"):
                cmp = filecmp.dircmp(os.path.join(d, folder), fixture(folder))
                self.assertEqual((cmp.left_only, cmp.right_only), ([], []), folder)
                _, mismatch, errors = filecmp.cmpfiles(os.path.join(d, folder), fixture(folder),
                                                       cmp.common_files, shallow=False)
                self.assertEqual((mismatch, errors), ([], []), folder)


if __name__ == "__main__":
    unittest.main()
