"""The CUDA scan kernel's hot loop fits H100's budget at full memory bandwidth.

The kernel (src/numerics/scan/cuda_scan_kernel.cu, its header states the
arithmetic) must read HBM3 at 3.35 TB/s: 209 G 16-byte vectors a second,
against about 16.7 T integer instructions a second (132 SMs x 64 INT32 lanes
x 1.98 GHz), so at most 80 instructions per vector, all included. This test
compiles the per-vector fast path (tests/ptx/scan_probe.cu, which runs
numerics/scan/cuda_scan_lanes.h's fast_fold over 1 and over 9 vectors, unrolled)
to PTX with nvcc, no GPU needed, and counts instructions: (count of 9 - count
of 1) / 8 per vector, its 16-byte load and address arithmetic included. The
budget here is 40, half the hardware's, for what PTX does not show (the
SASS it becomes, the loop, the occasional vector that is counted lane by
lane) and for clocks below boost.

Skipped, and said so, where there is no nvcc."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import SOURCE_DIR

BUDGET = 40  # PTX instructions per 16-byte vector
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def count(ptx, name):
    m = re.search(r"\.entry " + name + r"\((.*?)\n\}", ptx, re.S)
    assert m, name + " not in the PTX"
    body = m.group(1)[m.group(1).index("{"):]
    n = 0
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".")) or s.endswith(":") or s in "{}":
            continue
        n += 1
    return n


@unittest.skipIf(NVCC is None, "no nvcc on this machine: the kernel's instruction count needs CUDA's compiler")
class ScanKernelPtx(unittest.TestCase):
    def test_instructions_per_vector_fit_the_budget(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "probe.ptx")
            p = subprocess.run([NVCC, "-ptx", "-arch=sm_90", "-O3", "-std=c++20", "--expt-relaxed-constexpr",
                                "-I", os.path.join(SOURCE_DIR, "src"),
                                os.path.join(SOURCE_DIR, "tests", "ptx", "scan_probe.cu"), "-o", out],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            ptx = open(out).read()
        per = {}
        # fp16 and bf16 share the 2-byte code (only the constants differ), fp8
        # the 1-byte code, fp32 the 4-byte one; fp64 is here for completeness.
        for width, dtypes in (("2byte", "fp16/bf16"), ("1byte", "fp8"), ("4byte", "fp32"), ("8byte", "fp64")):
            per[dtypes] = (count(ptx, f"probe_{width}_9") - count(ptx, f"probe_{width}_1")) / 8
        print("PTX instructions per 16-byte vector:", per)
        for dtypes, n in per.items():
            self.assertGreater(n, 4, dtypes + ": the probe measured nothing")
            self.assertLessEqual(n, BUDGET, f"{dtypes}: {n} instructions per vector, budget {BUDGET}")


if __name__ == "__main__":
    unittest.main()
