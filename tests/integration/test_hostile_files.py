"""Files that change or are not files (issue 12, item 5): every case ends in one line on
stderr and its exit status, in bounded time and memory, never a signal or a hang.

- `scan`: a dump truncated while it is scanned (the scan stops itself after the header is
  parsed, GPUDIAG_TEST_STOP_AFTER_OPEN=1, the test truncates the file, then resumes it: no
  timing involved); a FIFO named *.safetensors given directly or inside a directory; a socket.
- `nccl-log`: a 4 KiB NUL block in a healthy log, /dev/zero given as a file and as standard
  input, a 3 GB sparse file, a 100 MB line, a symlink cycle, a FIFO, and 200,000 processes
  (linear: well under 10 s).

Every subprocess has a timeout, so a regression fails the test instead of hanging the suite.
"""
import json
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import unittest

from harness import BIN, SOURCE_DIR, resume, run, wait_stopped

FIX = os.path.join(SOURCE_DIR, "tests", "fixtures", "nccl_logs")
HEALTHY = os.path.join(FIX, "nccl1412_init_complete_one_process_many_gpus.log")


def limited_memory(limit=1 << 30):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def one_line(test, r, status, *parts):
    """Exit `status`, nothing on stdout, one line on stderr holding every part."""
    test.assertEqual(r.returncode, status, r.stdout[-2000:] + r.stderr[-2000:])
    test.assertEqual(r.stdout, "")
    lines = r.stderr.splitlines()
    test.assertEqual(len(lines), 1, r.stderr)
    for p in parts:
        test.assertIn(p, lines[0])
    return lines[0]


def write_safetensors(path, floats):
    """A loose safetensors file: one F32 tensor "w" of `floats` zeros."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [floats],
                               "data_offsets": [0, 4 * floats]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + 4 * floats)


class ScanFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_dump_truncated_while_it_is_scanned_is_one_line_and_exit_2(self):
        path = os.path.join(self.dir, "act.safetensors")
        write_safetensors(path, 4 << 20)  # 16 MiB: four 1 M-element ranges over two threads
        r = run([BIN, "scan", path, "--threads", "2"], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)  # the same file, left alone, scans clean
        env = dict(os.environ, GPUDIAG_TEST_STOP_AFTER_OPEN="1")
        p = subprocess.Popen([BIN, "scan", path, "--threads", "2"], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_stopped(p.pid, timeout=30)  # mapped and parsed, no tensor data read yet
            os.truncate(path, 4096)
            resume(p.pid)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        self.assertNotEqual(p.returncode, -signal.SIGBUS)
        line = one_line(self, r, 2, "the file changed while being read")
        self.assertTrue(line.startswith(f"gpudiag: {path}: "), line)

    def test_a_fifo_given_directly_is_refused_at_once(self):
        fifo = os.path.join(self.dir, "pipe.safetensors")
        os.mkfifo(fifo)
        # Nothing ever writes to it: a blocked open would run into the timeout.
        r = run([BIN, "scan", fifo], timeout=30)
        one_line(self, r, 2, f"gpudiag: {fifo}: is a FIFO (named pipe), not a regular file")

    def test_a_fifo_or_socket_in_a_directory_is_reported_and_not_read(self):
        write_safetensors(os.path.join(self.dir, "a.safetensors"), 16)
        fifo = os.path.join(self.dir, "b.safetensors")
        os.mkfifo(fifo)
        sock_path = os.path.join(self.dir, "c.npy")
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(sock_path)
            r = run([BIN, "scan", self.dir], timeout=30)
        finally:
            sock.close()
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr.splitlines(), [
            f"gpudiag: {fifo}: is a FIFO (named pipe), not a regular file; try: pass "
            ".safetensors or .npy files or a directory",
            f"gpudiag: {sock_path}: is a socket, not a regular file; try: pass .safetensors or "
            ".npy files or a directory"])


def nccl_log(*args, timeout=60, **kw):
    return run([BIN, "nccl-log", *args], timeout=timeout, **kw)


def report(*args, **kw):
    r = nccl_log("--json", *args, **kw)
    if r.returncode not in (0, 1):
        raise AssertionError(f"exit {r.returncode}: {r.stderr}")
    return r.returncode, json.loads(r.stdout)


class NcclLogFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_nul_block_in_a_healthy_log_is_junk(self):
        with open(HEALTHY, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        path = os.path.join(self.dir, "damaged.log")
        with open(path, "wb") as f:  # a zero-filled block glued to the front of a line
            f.write(b"".join(lines[:5]) + b"\0" * 4096 + b"".join(lines[5:]))
        want_code, want = report(HEALTHY)
        code, got = report(path)
        self.assertEqual(code, want_code)
        self.assertEqual(want_code, 0)
        self.assertEqual(len(got["processes"]), len(want["processes"]))
        self.assertEqual(got["nccl_lines"], want["nccl_lines"])
        self.assertEqual(got["other_lines"], want["other_lines"])
        self.assertEqual(got["junk_lines"], 1)
        self.assertEqual([f["id"] for f in got["findings"]], [f["id"] for f in want["findings"]])
        r = nccl_log(path)
        self.assertIn("1 skipped as junk (binary bytes, lines over 64 KiB)", r.stdout)

    def test_dev_zero_and_a_fifo_are_refused_at_once(self):
        one_line(self, nccl_log("/dev/zero", timeout=30), 2,
                 "'/dev/zero' is a character device, not a regular file")
        fifo = os.path.join(self.dir, "nccl.log")
        os.mkfifo(fifo)
        one_line(self, nccl_log(fifo, timeout=30), 2,
                 f"'{fifo}' is a FIFO (named pipe), not a regular file",
                 f"gpudiag nccl-log - < {fifo}")

    def test_a_fifo_in_a_run_directory_is_skipped(self):
        shutil.copy(HEALTHY, os.path.join(self.dir, "nccl.a.1.log"))
        os.mkfifo(os.path.join(self.dir, "nccl.b.2.log"))
        r = nccl_log(self.dir, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("nccl.b.2.log': it is a FIFO (named pipe), not a regular file", r.stderr)

    def test_endless_standard_input_stops_at_max_input(self):
        with open("/dev/zero", "rb") as zero:
            r = run([BIN, "nccl-log", "--max-input", "64MiB", "-"], stdin=zero, timeout=60,
                    preexec_fn=limited_memory())
        one_line(self, r, 2, "more than 64 MiB of input (--max-input); stopped reading '<stdin>'")

    def test_a_sparse_3_gb_file_is_read_in_bounded_memory(self):
        path = os.path.join(self.dir, "sparse.log")
        with open(path, "wb") as f:
            f.truncate(3 << 30)
        r = nccl_log(path, timeout=120, preexec_fn=limited_memory(512 << 20))
        one_line(self, r, 2, f"no NCCL log lines in '{path}'")

    def test_a_100_mb_line_is_junk_and_the_rest_is_read(self):
        path = os.path.join(self.dir, "long.log")
        shutil.copy(HEALTHY, path)
        with open(path, "ab") as f:
            f.write(b"x" * (100 << 20) + b"\n")
        with open(HEALTHY, "rb") as f:
            f.seek(0)
            with open(path, "ab") as out:
                out.write(f.read())  # the same lines again after the junk
        code, rep = report(path, preexec_fn=limited_memory(512 << 20))
        self.assertEqual(code, 0)
        self.assertEqual(rep["junk_lines"], 1)
        self.assertEqual(len(rep["processes"]), 1)

    def test_a_symlink_cycle_ends(self):
        run_dir = os.path.join(self.dir, "run")
        os.makedirs(os.path.join(run_dir, "sub"))
        shutil.copy(HEALTHY, os.path.join(run_dir, "sub", "nccl.a.1.log"))
        os.symlink(run_dir, os.path.join(run_dir, "sub", "loop"))
        os.symlink(os.path.join(run_dir, "self"), os.path.join(run_dir, "self"))
        code, rep = report(run_dir, timeout=30)
        want_code, want = report(HEALTHY)
        self.assertEqual(code, want_code)
        self.assertEqual([f["path"] for f in rep["files"]],
                         [os.path.join(run_dir, "sub", "nccl.a.1.log")])
        self.assertEqual(rep["nccl_lines"], want["nccl_lines"])
        r = nccl_log(run_dir, timeout=30)
        self.assertIn("loop': a directory already read (a symlink loop?)", r.stderr)

    def test_200k_processes_within_a_memory_bound(self):
        # Half the processes never complete init and each logs a WARN: every rule then
        # collects 100,000 processes. How long that takes is a benchmark's business, not
        # this test's: the timeout below only keeps a hang from blocking the suite.
        n, per_host = 200_000, 8
        path = os.path.join(self.dir, "big.log")
        with open(path, "w") as f:
            for r in range(n):
                h, pid = f"node{r // per_host}", 1000 + r
                pre = f"{h}:{pid}:{pid} [{r % per_host}]"
                comm = f"comm 0x{r:x} rank {r} nranks {n} cudaDev {r % per_host} busId 1000"
                f.write(f"{pre} NCCL INFO Bootstrap : Using eth0:10.{r >> 16}.{(r >> 8) & 255}."
                        f"{r & 255}<0>\n"
                        f"{pre} NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
                        f"{pre} NCCL INFO {comm} - Init START\n")
                if r % 2:
                    f.write(f"{pre} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
                            f"10.0.0.1<1234> failed : Connection refused\n")
                else:
                    f.write(f"{pre} NCCL INFO {comm} - Init COMPLETE\n")
        r = nccl_log(path, timeout=600, preexec_fn=limited_memory(4 << 30))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"NCCL logs: {n} processes on {n // per_host} hosts", r.stdout)
        self.assertIn(f"{n // 2} of {n} processes never reached Init COMPLETE", r.stdout)
        self.assertIn("connection to 10.0.0.1:1234 refused", r.stdout)


if __name__ == "__main__":
    unittest.main()
