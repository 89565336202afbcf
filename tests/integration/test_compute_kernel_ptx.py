"""The compute check's GEMM kernels keep to an instruction budget per step.

The kernels (src/gpu/compute_gemm.cu; their steps in src/gpu/compute_kernels.cuh)
are gpudiag's own so that a checksum means the same on every GPU of a model; the
rate they reach is compared between GPUs, so the loop must stay lean enough that
a GPU's arithmetic, not the loop's bookkeeping, sets it. This test compiles the
steps unrolled 1 and 9 times (tests/ptx/compute_probe.cu) to PTX with nvcc, no
GPU needed, and counts instructions per step: (count of 9 - count of 1) / 8.

- fp32: a k-tile is 16 fused multiply-adds from shared memory plus the tile's
  two global loads, two shared stores and two barriers; 32 shared loads and 16
  FMAs are 48, so 64 leaves room for the address arithmetic and no more (about
  4 instructions per FMA; 55 today). Every FMA is an explicit fma.rn.f32: the
  CPU's arithmetic bit for bit.
- bf16/fp16: a WMMA step is two fragment loads and one mma (PTX's wmma.load and
  wmma.mma), plus the pointer's advance: 8 at most (4-5 today).

Skipped, and said so, where there is no nvcc."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import SOURCE_DIR

BUDGET = {"fp32": 64, "bf16": 8, "fp16": 8}  # PTX instructions per step
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def body(ptx, name):
    m = re.search(r"\.entry " + name + r"\((.*?)\n\}", ptx, re.S)
    assert m, name + " not in the PTX"
    return m.group(1)[m.group(1).index("{"):]


def count(ptx, name):
    n = 0
    for line in body(ptx, name).splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".")) or s.endswith(":") or s in "{}":
            continue
        n += 1
    return n


@unittest.skipIf(NVCC is None, "no nvcc on this machine: the kernels' instruction counts need CUDA's compiler")
class ComputeKernelPtx(unittest.TestCase):
    def test_instructions_per_step_fit_the_budget(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "probe.ptx")
            p = subprocess.run([NVCC, "-ptx", "-arch=sm_90", "-O3", "-std=c++20", "--expt-relaxed-constexpr",
                                "-I", os.path.join(SOURCE_DIR, "src"),
                                os.path.join(SOURCE_DIR, "tests", "ptx", "compute_probe.cu"), "-o", out],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            ptx = open(out).read()
        per = {w: (count(ptx, f"probe_{w}_9") - count(ptx, f"probe_{w}_1")) / 8 for w in BUDGET}
        print("PTX instructions per step:", per)
        for w, n in per.items():
            self.assertGreater(n, 2, w + ": the probe measured nothing")
            self.assertLessEqual(n, BUDGET[w], f"{w}: {n} instructions per step, budget {BUDGET[w]}")
        # fp32: 16 explicit round-to-nearest FMAs per k-tile, none left to contraction.
        fmas = [len(re.findall(r"\bfma\.rn\.f32\b", body(ptx, f"probe_fp32_{k}"))) for k in (1, 9)]
        self.assertEqual(fmas, [16, 144])
        for w in ("bf16", "fp16"):
            mmas = len(re.findall(r"\bwmma\.mma\.sync\b", body(ptx, f"probe_{w}_9")))
            self.assertEqual(mmas, 9, w + ": one mma per step")


if __name__ == "__main__":
    unittest.main()
