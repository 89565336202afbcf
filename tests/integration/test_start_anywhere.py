"""The binary starts on a node with no NCCL and no CUDA runtime and says what
is missing: the node a user most needs to diagnose.

The libraries are hidden for real: each command runs in its own mount
namespace (unshare -m) where every folder that holds a libnccl or libcudart
is covered by an empty tmpfs, so neither the ld.so cache nor a search path
can reach them. The ELF header is checked too: no NEEDED entry for either.
NCCL stand-ins (tests/stubs/fake_nccl.c) give the wrong-version cases."""
import glob
import os
import shlex
import subprocess
import unittest

from harness import BIN, BUILD_DIR, SOURCE_DIR, broken_lines, ok_lines, run

FAKE = os.path.join(BUILD_DIR, "fake-nccl")
LIB_GLOBS = ["/usr/local/cuda*/lib*/libnccl.so*", "/usr/local/cuda*/lib*/libcudart.so*",
             "/usr/local/cuda*/targets/*/lib/libnccl.so*", "/usr/local/cuda*/targets/*/lib/libcudart.so*",
             "/usr/lib/x86_64-linux-gnu/libnccl.so*", "/usr/lib/x86_64-linux-gnu/libcudart.so*"]


def lib_dirs():
    """Folders holding a libnccl or libcudart here (resolved, without duplicates)."""
    dirs = set()
    for pattern in LIB_GLOBS:
        for f in glob.glob(pattern):
            dirs.add(os.path.dirname(os.path.realpath(f)))
    # Never cover the system library folder itself: only CUDA's own folders.
    return sorted(d for d in dirs if d not in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"))


def hidden(args, timeout=60, env=None):
    """Runs gpudiag ARGS where no libnccl and no libcudart can be found."""
    covers = "".join(f"mount -t tmpfs none {shlex.quote(d)} && " for d in lib_dirs())
    script = covers + " ".join(shlex.quote(a) for a in [BIN, *args])
    return run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
               timeout=timeout, env=env)


class StartsWithoutNcclOrCudart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("hiding libraries needs a mount namespace (run as root)")
        if any(glob.glob(p) for p in ["/usr/lib/x86_64-linux-gnu/libnccl.so*",
                                      "/usr/lib/x86_64-linux-gnu/libcudart.so*"]):
            raise unittest.SkipTest("libnccl/libcudart sit in the system library folder here: "
                                    "they cannot be hidden without hiding libc")
        probe = hidden(["info"])
        if "mount" in probe.stderr and probe.returncode != 0:
            raise unittest.SkipTest("cannot mount in a namespace here: " + probe.stderr.strip())

    def test_elf_needs_neither_library(self):
        r = run(["readelf", "-d", BIN])
        self.assertEqual(r.returncode, 0, r.stderr)
        needed = [l for l in r.stdout.splitlines() if "(NEEDED)" in l]
        self.assertTrue(needed, r.stdout)
        for lib in ("libnccl", "libcudart", "libcuda.so"):
            self.assertFalse([l for l in needed if lib in l], f"{lib} is NEEDED:\n" + "\n".join(needed))

    def test_the_namespace_really_hides_them(self):
        # A check of the test itself: the loader finds no NCCL in there.
        r = hidden(["info", "--json"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("libnccl.so.2 not found", r.stdout)

    def test_info_runs_and_names_what_is_missing(self):
        r = hidden(["info"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        nccl = [l for l in r.stdout.splitlines() if l.strip().startswith("nccl")]
        self.assertEqual(len(nccl), 1, r.stdout)
        self.assertIn("unusable: libnccl.so.2 not found", nccl[0])
        self.assertIn("--nccl-lib", nccl[0])
        self.assertIn("cuda      runtime", r.stdout)

    def test_host_check_scan_and_nccl_log_run(self):
        r = hidden(["launch", "--nproc-per-node", "2", "--", "check", "--backend", "host"], timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(ok_lines("\n".join(l.split(": ", 1)[-1] for l in r.stdout.splitlines()))), 2,
                         r.stdout)
        npy = os.path.join(SOURCE_DIR, "tests", "data", "numerics", "corpus", "valid", "v1.npy")
        r = hidden(["scan", "--device", "cpu", npy])
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        self.assertNotIn("error while loading shared libraries", r.stderr)
        logs = os.path.join(SOURCE_DIR, "tests", "fixtures", "nccl_logs", "ci_infra490_shm_no_space_2026.log")
        r = hidden(["nccl-log", logs])
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        self.assertIn("shm", r.stdout.lower())

    def test_nccl_backend_gives_one_broken_line_per_rank(self):
        r = hidden(["launch", "--nproc-per-node", "2", "--", "check", "--backend", "nccl",
                    "--timeout", "20"], timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = broken_lines("\n".join(l.split(": ", 1)[-1] for l in r.stdout.splitlines()))
        self.assertEqual(len(lines), 2, r.stdout)
        for m in lines:
            self.assertIn("libnccl.so.2 not found", m["reason"])
            self.assertIn("--nccl-lib", m["reason"])


class NcclLibOption(unittest.TestCase):
    def test_nonexistent_path_is_a_usage_error(self):
        r = run([BIN, "check", "--nccl-lib", "/nonexistent/libnccl.so.2"])
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("/nonexistent/libnccl.so.2", r.stderr)

    def test_too_old_nccl_is_named_on_every_rank(self):
        old = os.path.join(FAKE, "old", "libnccl.so.2")
        r = run([BIN, "launch", "--nproc-per-node", "2", "--", "check", "--backend", "nccl",
                 "--nccl-lib", old], timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = broken_lines("\n".join(l.split(": ", 1)[-1] for l in r.stdout.splitlines()))
        self.assertEqual(len(lines), 2, r.stdout)
        for m in lines:
            self.assertIn(f"NCCL 2.13.0 at {old} (--nccl-lib) is older than 2.14", m["reason"])

    def test_info_names_the_path_and_version_loaded(self):
        full = os.path.join(FAKE, "full", "libnccl.so.2")
        r = run([BIN, "info", "--nccl-lib", full])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"nccl      2.28.9 from {full} (found by --nccl-lib)", r.stdout)
        env = dict(os.environ, GPUDIAG_NCCL_LIB=full)
        r = run([BIN, "info"], env=env)
        self.assertIn(f"2.28.9 from {full} (found by GPUDIAG_NCCL_LIB)", r.stdout)


if __name__ == "__main__":
    unittest.main()
