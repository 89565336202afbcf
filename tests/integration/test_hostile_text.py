"""A stranger's bytes reach no terminal and break no writer (util/text.h).

A rank whose host name is set (in its own UTS namespace, `unshare -u`) to bytes
that are not UTF-8, with a clear-screen sequence, a newline and a
right-to-left override: every rank still ends OK, rank 0's status lines,
table and --json carry the name as visible escapes (`\\xff`, `\\x1b`,
`\\u202e`), and no raw control byte reaches stdout. A tensor whose name sets
the terminal's title (an OSC sequence) is scanned and reported with the name
escaped, on stdout and in gpudiag's own messages. A setting that is not
UTF-8 (GPUDIAG_NCCL_LIB) is one line and exit 2, never an internal error."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from harness import BIN, Ranks, free_port, rank_env

HOSTILE = b"h\xff\x1b[2J\nX\xe2\x80\xae"
ARGS = ["check", "--backend", "host", "--size", "1MiB", "--mem", "1MiB", "--iters", "1",
        "--timeout", "60"]
# Sets the host name in a new UTS namespace, then becomes gpudiag.
SETHOST = ("import os, socket, sys; socket.sethostname(bytes.fromhex(sys.argv[1])); "
           "os.execv(sys.argv[2], sys.argv[2:])")


def raw_controls(data: bytes):
    return [b for b in data if (b < 0x20 and b not in (0x0a,)) or b == 0x7f]


@unittest.skipIf(shutil.which("unshare") is None, "no unshare(1) to give a rank its own host name")
class HostileText(unittest.TestCase):
    def test_a_host_name_of_stray_bytes_is_escaped_everywhere(self):
        port = free_port()
        with tempfile.TemporaryDirectory() as d:
            js = os.path.join(d, "job.json")
            envs = [rank_env(0, 2, port), rank_env(1, 2, port)]
            procs = [subprocess.Popen([BIN, *ARGS, "--json", js], env=envs[0], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE),
                     subprocess.Popen(["unshare", "-u", sys.executable, "-c", SETHOST, HOSTILE.hex(), BIN,
                                       *ARGS], env=envs[1], stdout=subprocess.PIPE, stderr=subprocess.PIPE)]
            outs = [p.communicate(timeout=120) for p in procs]
            codes = [p.returncode for p in procs]
            self.assertEqual(codes, [0, 0], [o[1][-2000:] for o in outs])
            for out, err in outs:
                self.assertEqual(raw_controls(out + err), [], out + err)
                (out + err).decode("utf-8")  # valid UTF-8, or this raises
            shown = outs[0][0].decode()
            self.assertIn("h\\xff\\x1b[2J\\x0aX\\u202e", shown)  # rank 0's table row
            self.assertIn("[h\\xff\\x1b[2J\\x0aX\\u202e-1] is OK", outs[1][0].decode())
            with open(js, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
            self.assertEqual(doc["ranks"][1]["host"], "h\\xff\\x1b[2J\\x0aX\\u202e")

    def test_a_tensor_name_that_sets_the_terminal_title_is_escaped(self):
        name = "\x1b]0;pwned\x07layer"
        header = json.dumps({name: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
        header += b" " * (-len(header) % 8)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.safetensors")
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header + struct.pack("<2f", float("inf"), 1.0))
            r = subprocess.run([BIN, "scan", path], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)  # the inf was found
        self.assertEqual(raw_controls(r.stdout + r.stderr), [], r.stdout + r.stderr)
        self.assertIn("\\x1b]0;pwned\\x07layer", (r.stdout + r.stderr).decode())

    def test_a_statistics_label_that_clears_the_screen_is_escaped(self):
        stats = {"count": 2, "abs_min": 0.5, "abs_max": "inf", "nan": 0, "pos_inf": 1, "neg_inf": 0,
                 "zero": 0, "subnormal": 0, "ge_1e2": 1, "ge_1e3": 1, "ge_1e4": 1}
        doc = {"format": "gpudiag-frames-stats/1", "batch_number": 0,
               "frames": [{"module": "m", "class": "C",
                           "entries": [{"label": "x\x1b[2J\nFAKE line", "dtype": "F32", "shape": [2],
                                        "stats": stats}]}]}
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "batch-000000.stats.json"), "w") as f:
                json.dump(doc, f)
            r = subprocess.run([BIN, "scan", d], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)  # the inf was found
        self.assertEqual(raw_controls(r.stdout + r.stderr), [], r.stdout + r.stderr)
        self.assertIn("x\\x1b[2J\\x0aFAKE line has infs", (r.stdout + r.stderr).decode())

    def test_a_loop_of_links_named_like_a_tensor_is_one_line_not_an_internal_error(self):
        with tempfile.TemporaryDirectory() as d:
            os.symlink("b.npy", os.path.join(d, "a.npy"))
            os.symlink("a.npy", os.path.join(d, "b.npy"))
            r = subprocess.run([BIN, "scan", d], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNotIn("internal error", r.stderr)
        lines = r.stderr.strip().splitlines()  # one line a file, naming it
        self.assertEqual(len(lines), 2, r.stderr)
        for line, name in zip(lines, ("a.npy", "b.npy")):
            self.assertIn(name + ": cannot open: Too many levels of symbolic links", line)

    def test_a_setting_that_is_not_utf8_is_one_line_and_exit_2(self):
        env = dict(os.environ)
        env_b = {k.encode(): v.encode() for k, v in env.items()}
        env_b[b"GPUDIAG_NCCL_LIB"] = b"/nonexistent/\xff\x1b[2J/libnccl.so.2"
        r = subprocess.run([BIN, "info"], capture_output=True, timeout=60, env=env_b)
        self.assertNotIn(b"internal error", r.stderr)
        self.assertEqual(raw_controls(r.stdout + r.stderr), [], r.stdout + r.stderr)
        (r.stdout + r.stderr).decode("utf-8")


if __name__ == "__main__":
    unittest.main()
