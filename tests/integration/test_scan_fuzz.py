"""Fuzzes the dump readers and the store's wire protocol for a bounded time: scripts/fuzz.sh builds the
libFuzzer targets with clang (ASan + UBSan, in a build directory of their
own) and runs each one, seeded with the test corpus. Any crash, leak,
sanitizer report, input slower than 5 s or allocation over 512 MiB fails."""

import os
import shutil
import subprocess
import unittest

from scanlib import BUILD_DIR, SOURCE_DIR

SECONDS = int(os.environ.get("GPUDIAG_FUZZ_SECONDS", "20"))


class ReaderFuzzers(unittest.TestCase):
    def test_readers_survive_fuzzing(self):
        if not shutil.which("clang++"):
            self.skipTest("clang++ not installed (Debian: clang libclang-rt-14-dev); fuzzers not run")
        r = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "fuzz.sh"), str(SECONDS),
                            os.path.join(BUILD_DIR, "fuzz")], capture_output=True, text=True,
                           timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("\nDone "), 3, r.stdout)  # safetensors, npy, store wire
        self.assertIn("fuzz.sh: all targets clean", r.stdout)


if __name__ == "__main__":
    unittest.main()
