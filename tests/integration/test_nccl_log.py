"""End-to-end tests of `gpudiag nccl-log` on real NCCL logs.

Every finding is checked on a log quoted from a public issue or made by running the real NCCL
(tests/fixtures/nccl_logs/SOURCES.md says which). The tests look at what a user reads: the
finding ids and titles, who they name, the quoted log lines, the exit status, and the JSON.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("GPUDIAG_BIN", "build/gpudiag")
SRC = os.environ.get("GPUDIAG_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
FIX = os.path.join(SRC, "tests", "fixtures", "nccl_logs")
PROBE = os.path.join(FIX, "generated", "ncclprobe.py")
NCCL_LIB = os.environ.get("GPUDIAG_NCCL_LIB", "/usr/local/cuda/lib/libnccl.so.2")


def fixture(*parts):
    return os.path.join(FIX, *parts)


def run(*args, env=None, timeout=60):
    return subprocess.run([BIN, "nccl-log", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def report(*paths):
    """Runs --json on the paths; returns (exit status, parsed report)."""
    r = run("--json", *paths)
    if r.returncode not in (0, 1):
        raise AssertionError(f"exit {r.returncode}: {r.stderr}")
    return r.returncode, json.loads(r.stdout)


def findings(rep, fid):
    return [f for f in rep["findings"] if f["id"] == fid]


class FindingsOnRealLogs(unittest.TestCase):
    def one(self, path, fid, severity="problem"):
        code, rep = report(fixture(*path) if isinstance(path, tuple) else fixture(path))
        fs = findings(rep, fid)
        self.assertEqual(len(fs), 1, [f["id"] for f in rep["findings"]])
        self.assertEqual(fs[0]["severity"], severity)
        if severity == "problem":
            self.assertEqual(code, 1)
        return fs[0], rep

    def test_loopback_in_multinode_job(self):
        f, _ = self.one("nccl1053_loopback_multinode.log", "loopback-interface")
        self.assertIn("lo (127.0.0.1)", f["title"])
        self.assertIn("NCCL_SOCKET_IFNAME", f["remedy"])
        self.assertIn("NET/Socket : Using [0]lo:127.0.0.1<0>", f["evidence"][0]["text"])

    def test_loopback_on_a_single_host_is_fine(self):
        _, rep = report(fixture("horovod3625_loopback_single_node_ompi.log"))
        self.assertEqual(findings(rep, "loopback-interface"), [])
        self.assertEqual(rep["processes"][0]["bootstrap"][0]["name"], "lo")

    def test_container_bridge_interface(self):
        f, _ = self.one("pytorch68893_veth_socket_multinode.log", "container-interface")
        self.assertIn("veth75fa783", f["title"])
        self.assertEqual(f["who"], ["ip-172-31-0-137:14605"])
        f, _ = self.one("oneflow3586_veth_connect_timeout.log", "container-interface")
        self.assertIn("veth25f2e72", f["title"])

    def test_verbs_missing_means_sockets_between_nodes(self):
        f, _ = self.one("pytorch68893_veth_socket_multinode.log", "verbs-missing")
        self.assertIn("TCP sockets", f["title"])
        self.assertIn("libibverbs", f["remedy"])

    def test_verbs_missing_on_one_node_is_a_note(self):
        f, rep = self.one("nccl857_verbs_missing_single_node.log", "verbs-missing", "note")
        self.assertEqual(len(f["who"]), 3)  # the 4th rank's excerpt ends before its WARN
        self.assertEqual(findings(rep, "first-warn"), [])  # the verbs WARN is not the error

    def test_connection_refused_or_aborted(self):
        f, _ = self.one("nccl_tests166_connection_abort.log", "connection-refused")
        self.assertIn("10.0.0.2:45763", f["title"])
        self.assertIn("firewall", f["remedy"])

    def test_connection_closed_by_peer(self):
        f, _ = self.one("nccl_tests166_connection_abort.log", "connection-lost")
        self.assertIn("node1:57557", f["title"])
        f, _ = self.one("nccl_tests185_ibv_modify_qp_unreachable.log", "connection-lost")
        self.assertIn("dgxh100-3:41109", f["title"])

    def test_connect_timeout_from_retry_lines_when_the_warn_is_cut(self):
        f, _ = self.one("oneflow3586_veth_connect_timeout.log", "network-unreachable")
        self.assertIn("Call to connect returned Connection timed out", f["evidence"][0]["text"])

    def test_dev_shm_too_small(self):
        f, _ = self.one("nccl_tests166_shm_extend_failed.log", "shm-too-small")
        self.assertIn("5967872 bytes", f["title"])
        self.assertIn("--shm-size", f["remedy"])
        f, _ = self.one("ci_infra490_shm_no_space_2026.log", "shm-too-small")
        self.assertIn("No space left on device", f["evidence"][0]["text"])
        f, _ = self.one("nccl290_shm_posix_fallocate_old_ring.log", "shm-too-small")
        self.assertEqual(f["who"], ["gpu2-ru7:2143"])
        f, _ = self.one("nccl525_shm_host_stripped.log", "shm-too-small")
        self.assertIn("9637888", f["title"])

    def test_dev_shm_not_shared(self):
        f, _ = self.one("nccl1589_shm_attach_failed.log", "shm-not-shared")
        self.assertIn("--ipc=host", f["remedy"])

    def test_ib_completion_status_12_on_roce_points_at_gid_index(self):
        f, _ = self.one("nccl1814_roce_status12.log", "ib-completion-error")
        self.assertIn("status 12", f["title"])
        self.assertIn("172.36.143.59:44206", f["title"])
        self.assertIn("NCCL_IB_GID_INDEX", f["remedy"])
        self.assertEqual(f["who"], ["rank 36 (hostname-test:984)"])

    def test_ib_completion_with_different_gid_indexes_names_them_as_the_cause(self):
        # The flush (status 5, another peer) comes first; the finding shows the
        # status 12 with its own peer, and the GID index each host set.
        f, _ = self.one(("constructed", "gid_index_mismatch"), "ib-completion-error")
        self.assertIn("status 12", f["title"])
        self.assertIn("from peer 10.20.0.12:50114", f["title"])
        self.assertNotIn("10.20.0.99", f["title"])
        self.assertIn("NCCL_IB_GID_INDEX differs between hosts (0 on nodeB; 3 on nodeA)", f["title"])
        self.assertTrue(f["remedy"].startswith("set NCCL_IB_GID_INDEX to the same"), f["remedy"])

    def test_ib_completion_error_old_spelling(self):
        f, _ = self.one("nccl426_error12_comment.log", "ib-completion-error")
        self.assertIn("RETRY_EXC_ERR", f["title"])
        f, _ = self.one("nccl1405_status12_ib_plugin.log", "ib-completion-error")
        self.assertIn("10.216.210.236:54862", f["title"])

    def test_ib_queue_pair_setup(self):
        f, _ = self.one("nccl_tests185_ibv_modify_qp_unreachable.log", "ib-qp-setup")
        self.assertIn("ibv_modify_qp", f["title"])
        self.assertIn("GID", f["remedy"])
        f, _ = self.one("horovod1651_old_cu_ibv_create_qp.log", "ib-qp-setup")
        self.assertIn("locked-memory", f["remedy"])

    def test_p2p_failing(self):
        f, _ = self.one("ray_lightning24_p2p_ipc_unsupported.log", "p2p-failed")
        self.assertIn("ACS", f["remedy"])
        self.assertIn("peer access is not supported", f["evidence"][0]["text"])
        f, _ = self.one("horovod785_old_p2p_ipc_cu.log", "p2p-failed")
        self.assertEqual(len(f["who"]), 2)

    def test_p2p_disabled_between_connected_gpus_is_a_note(self):
        f, _ = self.one("pytorch130113_p2p_disabled_connected.log", "p2p-disabled", "note")
        self.assertEqual(len(f["who"]), 3)

    def test_version_mismatch(self):
        # constructed: no public log of a job with two NCCL versions was found (SOURCES.md)
        f, _ = self.one(("constructed", "version_mismatch"), "version-mismatch")
        self.assertIn("2.18.5", f["title"])
        self.assertIn("2.19.3", f["title"])
        self.assertEqual(sorted(f["who"]), ["rank 0 (nodeA:1000)", "rank 1 (nodeB:2000)"])

    def test_different_networks_quote_the_using_network_lines(self):
        # constructed: no public log of one job on two networks was found (SOURCES.md)
        _, rep = report(fixture("constructed", "network_mismatch"))
        f = [f for f in findings(rep, "ranks-disagree") if "different networks" in f["title"]]
        self.assertEqual(len(f), 1, rep["findings"])
        self.assertEqual(f[0]["who"], ["rank 2 (nodeB:4200)"])
        texts = [e["text"] for e in f[0]["evidence"]]
        self.assertEqual(texts, ["nodeB:4200:4210 [0] NCCL INFO Using network Socket",
                                 "nodeA:3100:3110 [0] NCCL INFO Using network IB"])
        self.assertFalse(any("Channel" in t or "COMPLETE" in t for t in texts), texts)

    def test_same_version_everywhere_is_not_a_mismatch(self):
        _, rep = report(fixture("nccl1267_per_node"))
        self.assertEqual(findings(rep, "version-mismatch"), [])
        self.assertEqual({p["nccl_version"] for p in rep["processes"]}, {"2.19.3+cuda12.3"})

    def test_rank_never_reached_init_complete(self):
        f, _ = self.one("vllm8447_init_start_never_complete.log", "init-incomplete")
        self.assertEqual(f["who"], ["rank 0 (VM-160-69-tencentos:561)"])
        f, rep = self.one("nccl1814_roce_status12.log", "init-incomplete")
        self.assertIn("4 of 8 processes", f["title"])
        self.assertIn("rank 33 (hostname-test:981)", f["who"])
        self.assertNotIn("rank 32 (hostname-test:980)", f["who"])
        missing = findings(rep, "ranks-missing")
        self.assertEqual(len(missing), 1)
        self.assertIn("59 of 64 ranks", missing[0]["title"])

    def test_healthy_excerpt_exits_zero_with_notes_only(self):
        r = run(fixture("nccl1412_init_complete_one_process_many_gpus.log"))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("0 problems, 1 note", r.stdout)
        _, rep = report(fixture("nccl1412_init_complete_one_process_many_gpus.log"))
        p = rep["processes"][0]
        self.assertEqual(p["ranks"], [0, 1, 4, 5, 6])  # one process, several GPUs
        self.assertTrue(p["init_complete"])
        self.assertEqual([f["id"] for f in rep["findings"]], ["ranks-missing"])

    def test_first_warn_and_its_error_chain(self):
        f, _ = self.one("nccl_tests166_connection_abort.log", "first-warn")
        self.assertIn("socketStartConnect", f["title"])
        self.assertIn("misc/socket.cc:564 -> misc/socket.cc:586", f["remedy"])
        self.assertIn("returned 2 (ncclSystemError", f["remedy"])
        self.assertIn("explained by connection-refused", f["remedy"])
        f, _ = self.one("lightning14986_bootstrap_root_already_checked_in.log", "first-warn")
        self.assertIn("claim the same rank", f["remedy"])


class Job(unittest.TestCase):
    def test_directory_of_per_rank_files_names_the_ranks_that_disagree(self):
        code, rep = report(fixture("generated", "capture_lo_vs_eth0"))
        self.assertEqual(code, 1)
        self.assertEqual(len(rep["files"]), 2)
        self.assertEqual(len(rep["processes"]), 2)
        dis = [f for f in findings(rep, "ranks-disagree") if f["severity"] == "problem"]
        self.assertEqual(len(dis), 1)
        self.assertIn("eth0 on vm:", dis[0]["title"])
        self.assertIn("lo on vm:", dis[0]["title"])
        self.assertEqual(len(dis[0]["who"]), 2)
        env = [f for f in findings(rep, "ranks-disagree") if "NCCL_SOCKET_IFNAME" in f["title"]]
        self.assertEqual(len(env), 1)
        # The WARN timestamps carry microseconds: the lo rank failed first.
        first = findings(rep, "first-warn")[0]
        lo_rank = [p["key"] for p in rep["processes"] if p["bootstrap"][0]["name"] == "lo"][0]
        self.assertEqual(first["who"], [lo_rank])

    def test_per_node_plugin_mismatch(self):
        _, rep = report(fixture("nccl1634_plugin_per_node"))
        f = findings(rep, "ranks-disagree")
        self.assertEqual(len(f), 1)
        self.assertIn("internal on HGX-H100-11:18226", f[0]["title"])
        self.assertIn("libnccl-net.so on HGX-H100-04:589474", f[0]["title"])

    def test_several_files_are_one_job(self):
        _, rep = report(fixture("nccl1267_per_node"))
        self.assertEqual(len(rep["files"]), 3)
        self.assertEqual(rep["hosts"], ["instance-8g-96c-2", "instance-8g-96c-3",
                                        "instance-8g-96c-4"])
        self.assertTrue(rep["multi_node"])

    def test_open_mpi_tag_output_ranks_and_version(self):
        _, rep = report(fixture("horovod3751_ompi_tag_output_roce.log"))
        by_key = {p["key"]: p for p in rep["processes"]}
        self.assertEqual([p["launcher_rank"] for p in rep["processes"]], [0, 1, 2, 3])
        self.assertEqual(by_key["j66d10267:290"]["nccl_version"], "2.8.4+cuda11.2")
        self.assertEqual(by_key["j66d10267:290"]["network_kind"], "IB (RoCE)")

    def test_legacy_nccl_2_2_lines(self):
        _, rep = report(fixture("pytorch14870_legacy_info_without_nccl_word.log"))
        p = rep["processes"][0]
        self.assertEqual(p["rank"], 6)
        self.assertEqual(p["network_kind"], "IB (RoCE)")
        self.assertEqual(p["bootstrap"][0]["name"], "eth1")

    def test_old_ring_transports(self):
        _, rep = report(fixture("nccl290_shm_posix_fallocate_old_ring.log"))
        self.assertEqual({p["key"]: p["transports"] for p in rep["processes"]}["gpu2-ru7:2145"],
                         {"SHM/direct": [0, 2]})

    def test_reads_a_pipe(self):
        with open(fixture("nccl_tests166_connection_abort.log")) as f:
            r = subprocess.run([BIN, "nccl-log", "--json", "-"], stdin=f, capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        rep = json.loads(r.stdout)
        self.assertEqual(rep["files"][0]["path"], "<stdin>")
        self.assertEqual(len(findings(rep, "connection-refused")), 1)

    def test_text_report_has_table_and_findings(self):
        r = run(fixture("nccl1814_roce_status12.log"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("RANK", r.stdout)
        self.assertIn("hostname-test:984", r.stdout)
        self.assertIn("PROBLEM [ib-completion-error]", r.stdout)
        self.assertIn("  try:  ", r.stdout)
        self.assertEqual(r.stderr, "")


class BadAndOddInput(unittest.TestCase):
    def assert_bad_input(self, r, words):
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(words, lines[0])

    def test_no_nccl_lines_is_bad_input(self):
        for name in ("empty.log", "random_bytes.bin", "torchrun_traceback_no_nccl.log"):
            self.assert_bad_input(run(fixture("garbage", name)), "no NCCL log lines")

    def test_unreadable_paths(self):
        self.assert_bad_input(run("/nonexistent/nccl.log"), "/nonexistent/nccl.log")
        with tempfile.TemporaryDirectory() as d:
            self.assert_bad_input(run(d), "no files")
        self.assert_bad_input(run(), "no log file")

    def test_unreadable_file_in_a_directory(self):
        if os.geteuid() == 0:
            self.skipTest("root reads files whatever their mode")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "nccl.a.1.log")
            shutil.copy(fixture("nccl426_error12_comment.log"), path)
            os.chmod(path, 0)
            self.assert_bad_input(run(d), "nccl.a.1.log")

    def test_binary_garbage_around_real_lines(self):
        code, rep = report(fixture("garbage", "binary_around_nccl_lines.log"))
        self.assertEqual(code, 1)
        self.assertEqual(len(rep["processes"]), 1)
        self.assertEqual(len(findings(rep, "first-warn")), 1)
        self.assertGreater(rep["other_lines"], 0)

    def test_truncated_logs(self):
        code, rep = report(fixture("generated", "mpirun_tag_output_truncated.log"))
        self.assertEqual(code, 1)
        self.assertEqual(len(rep["processes"]), 2)
        # every quoted issue log that ends mid-line still parses
        for name in sorted(os.listdir(FIX)):
            if name.endswith(".log"):
                code, rep = report(fixture(name))
                self.assertGreater(rep["nccl_lines"], 0, name)

    def test_json_survives_invalid_utf8(self):
        r = run("--json", fixture("garbage", "binary_around_nccl_lines.log"))
        self.assertEqual(r.returncode, 1)
        json.loads(r.stdout)

    def test_large_log_is_fast(self):
        with open(fixture("nccl1814_roce_status12.log")) as f:
            text = f.read()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "big.log")
            with open(path, "w") as f:
                for _ in range(3000):  # about 150,000 lines
                    f.write(text)
            r = run("--json", path, timeout=30)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(json.loads(r.stdout)["nccl_lines"], 46 * 3000)


class RunDirectoryWithOtherFiles(unittest.TestCase):
    """A run directory also holds nccl-log's own earlier reports and files that are no logs:
    they are named on stderr as skipped and change no finding."""

    def fill_and_compare(self, logs_dir, prefix=None):
        with tempfile.TemporaryDirectory() as d:
            run_dir = os.path.join(d, "run")
            os.mkdir(run_dir)
            for name in sorted(os.listdir(logs_dir)):
                with open(os.path.join(logs_dir, name), errors="surrogateescape") as src, \
                        open(os.path.join(run_dir, name), "w", errors="surrogateescape") as dst:
                    for i, line in enumerate(src):
                        # torchrun --tee: "[default<local rank>]:" before each line
                        dst.write(f"[default{len(name) % 4}]:{line}" if prefix else line)
            before = run("--json", run_dir)
            self.assertIn(before.returncode, (0, 1), before.stderr)
            text = run(run_dir)
            self.assertEqual(text.returncode, before.returncode)
            self.assertEqual(text.stderr, "")
            # What a user does: keep the reports beside the logs, and other files too.
            with open(os.path.join(run_dir, "nccl-log.json"), "w") as f:
                f.write(before.stdout)
            with open(os.path.join(run_dir, "nccl-log.txt"), "w") as f:
                f.write(text.stdout)
            with open(os.path.join(run_dir, "notes.txt"), "w") as f:
                f.write("rerun after the switch firmware update\n")
            shutil.copy(fixture("garbage", "random_bytes.bin"), os.path.join(run_dir, "core.bin"))

            after = run("--json", run_dir)
            self.assertEqual(after.returncode, before.returncode, after.stderr)
            old, new = json.loads(before.stdout), json.loads(after.stdout)
            self.assertEqual(new["findings"], old["findings"])
            self.assertEqual(new["processes"], old["processes"])
            self.assertEqual(new["hosts"], old["hosts"])
            self.assertEqual(new["files"], old["files"])
            self.assertEqual(new["other_lines"], old["other_lines"])
            skipped = {os.path.basename(f["path"]): f["why"] for f in new["skipped_files"]}
            self.assertEqual(skipped, {"nccl-log.json": "a gpudiag report",
                                       "nccl-log.txt": "a gpudiag report",
                                       "notes.txt": "no NCCL line",
                                       "core.bin": "binary data"})
            # One line on stderr names every skipped file and why.
            lines = after.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, after.stderr)
            self.assertIn("skipped 4 of", lines[0])
            for name, why in skipped.items():
                self.assertIn(f"{name}' ({why})", lines[0])
            # The text report says the same as before, plus the count of skipped files.
            again = run(run_dir)
            self.assertEqual(again.stdout.split("\n", 1)[1], text.stdout.split("\n", 1)[1])
            self.assertIn("4 files skipped (not NCCL logs)", again.stdout.splitlines()[0])
            return new

    def test_per_node_logs_with_reports_beside_them(self):
        rep = self.fill_and_compare(fixture("nccl1267_per_node"))
        self.assertEqual(len(rep["hosts"]), 3)

    def test_per_rank_captures_with_findings(self):
        rep = self.fill_and_compare(fixture("generated", "capture_lo_vs_eth0"))
        self.assertTrue(findings(rep, "ranks-disagree"))

    def test_torchrun_prefixed_logs_invent_no_hosts(self):
        rep = self.fill_and_compare(fixture("nccl1267_per_node"), prefix=True)
        self.assertEqual(rep["hosts"], ["instance-8g-96c-2", "instance-8g-96c-3",
                                        "instance-8g-96c-4"])

    def test_a_report_named_directly_is_not_read(self):
        log = fixture("nccl_tests166_connection_abort.log")
        with tempfile.TemporaryDirectory() as d:
            saved = os.path.join(d, "report.json")
            with open(saved, "w") as f:
                f.write(run("--json", log).stdout)
            r = run("--json", log, saved)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(json.loads(r.stdout)["findings"],
                             json.loads(run("--json", log).stdout)["findings"])
            self.assertIn("report.json' (a gpudiag report)", r.stderr)


class NcclDebugWithoutNccl(unittest.TestCase):
    """`check --nccl-debug` on the host backend: NCCL never runs, so nothing is captured."""

    def test_host_backend_says_so_once_and_leaves_no_folder(self):
        with tempfile.TemporaryDirectory() as d:
            env = {k: v for k, v in os.environ.items()
                   if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
            r = subprocess.run([BIN, "launch", "--nproc-per-node", "2", "--", "check",
                                "--backend", "host", "--size", "1MiB", "--iters", "1",
                                "--nccl-debug", "info"],
                               cwd=d, env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(r.stdout.count("is OK (global rank:"), 2, r.stdout)
            said = [l for l in (r.stdout + r.stderr).splitlines() if "NCCL is not used" in l]
            self.assertEqual(len(said), 1, r.stdout + r.stderr)
            self.assertIn("--nccl-debug: NCCL is not used by the host backend; nothing to capture",
                          said[0])
            self.assertNotIn("nothing was captured", r.stdout + r.stderr)
            self.assertNotIn("NCCL logs of every rank go to", r.stderr)
            self.assertEqual(os.listdir(d), [])

    def test_a_named_run_directory_is_not_created_either(self):
        with tempfile.TemporaryDirectory() as d:
            run_dir = os.path.join(d, "logs", "run1")
            r = subprocess.run([BIN, "check", "--backend", "host", "--nccl-debug",
                                "--nccl-debug-dir", run_dir],
                               cwd=d, capture_output=True, text=True, timeout=120,
                               env={k: v for k, v in os.environ.items()
                                    if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(r.stderr.count("NCCL is not used by the host backend"), 1, r.stderr)
            self.assertEqual(os.listdir(d), [])


class CaptureWithRealNccl(unittest.TestCase):
    def test_print_env_rejects_unknown_subsystem(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("--print-env", os.path.join(d, "run"), "--subsys", "INIT,NETT")
            self.assertEqual(r.returncode, 2)
            self.assertIn("NETT", r.stderr)

    def test_print_env_then_real_nccl_then_summary(self):
        if not os.path.exists(NCCL_LIB):
            self.skipTest(f"no NCCL library at {NCCL_LIB} (set GPUDIAG_NCCL_LIB)")
        with tempfile.TemporaryDirectory() as d:
            run_dir = os.path.join(d, "run")
            r = run("--print-env", run_dir, "--subsys", "init,env,bootstrap")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.isdir(run_dir))
            env = dict(os.environ, GPUDIAG_NCCL_LIB=NCCL_LIB)
            for line in r.stdout.splitlines():
                name, value = line[len("export "):].split("=", 1)
                env[name] = value.strip("'")
            self.assertEqual(env["NCCL_DEBUG_SUBSYS"], "INIT,ENV,BOOTSTRAP")
            # Two ranks of a job, the second told to bootstrap over lo.
            procs = [subprocess.Popen([sys.executable, PROBE], env=e, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
                     for e in (env, dict(env, NCCL_SOCKET_IFNAME="lo"))]
            pids = [p.pid for p in procs]
            for p in procs:
                p.wait(timeout=60)
            files = sorted(os.listdir(run_dir))
            self.assertEqual(len(files), 2, files)
            for pid in pids:
                self.assertTrue(any(f.endswith(f".{pid}.log") for f in files), (pid, files))
            code, rep = report(run_dir)
            self.assertEqual(sorted(p["pid"] for p in rep["processes"]), sorted(pids))
            dis = [f for f in findings(rep, "ranks-disagree") if f["severity"] == "problem"]
            self.assertEqual(len(dis), 1, rep["findings"])
            self.assertIn(f":{pids[1]}", dis[0]["title"])
            if all(p.returncode == 0 for p in procs):  # a GPU machine: init completes
                self.assertEqual(findings(rep, "init-incomplete"), [])
            else:
                self.assertEqual(code, 1)
                self.assertEqual(len(findings(rep, "first-warn")), 1)


class GpuRuns(unittest.TestCase):
    def test_every_rank_of_a_gpu_run_completes_init(self):
        gpu = fixture("gpu")
        runs = [os.path.join(gpu, d) for d in sorted(os.listdir(gpu))
                if os.path.isdir(os.path.join(gpu, d))]
        if not runs:
            self.skipTest("no GPU run captured yet in tests/fixtures/nccl_logs/gpu")
        for path in runs:
            _, rep = report(path)
            self.assertEqual(findings(rep, "init-incomplete"), [], path)
            self.assertTrue(all(p["init_complete"] for p in rep["processes"]), path)


if __name__ == "__main__":
    unittest.main()
