"""What `gpudiag scan` accepts and rejects: the malformed corpus (every file:
exit 2, one stderr line naming the file and the problem, nothing on stdout,
bounded time and memory), loose safetensors and numpy-written .npy files
(versions 1-3, big-endian, Fortran order, raw bf16 with --dtype), and that
scanning never initialises MPI or NCCL."""

import json
import os
import resource
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from scanlib import GPUDIAG, SOURCE_DIR, dump_activations, scan

CORPUS = os.path.join(SOURCE_DIR, "tests", "data", "numerics", "corpus")


def limited_memory():
    # Far below what a "header too long" or "shape overflow" file would make
    # a careless reader allocate.
    resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))


class MalformedCorpus(unittest.TestCase):
    def test_each_file_is_rejected_with_one_line(self):
        folder = os.path.join(CORPUS, "malformed")
        with open(os.path.join(folder, "MANIFEST.json")) as f:
            manifest = json.load(f)
        self.assertGreater(len(manifest), 40)
        for name, fragment in sorted(manifest.items()):
            with self.subTest(file=name):
                path = os.path.join(folder, name)
                r = subprocess.run([GPUDIAG, "scan", path], capture_output=True, text=True, timeout=30,
                                   preexec_fn=limited_memory)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "")
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith(f"gpudiag: {path}: "), lines[0])
                self.assertIn(fragment, lines[0])

    def test_a_directory_reports_every_bad_file(self):
        folder = os.path.join(CORPUS, "malformed")
        r = scan(folder)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "")
        files = [f for f in os.listdir(folder) if f.endswith((".npy", ".safetensors"))]
        # Files that fail on their own (not only in combination) get one line each.
        self.assertGreaterEqual(len(r.stderr.splitlines()), len(files) - 8)
        self.assertLessEqual(len(r.stderr.splitlines()), len(files))


class LooseTensors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_valid_corpus(self):
        r = scan(os.path.join(CORPUS, "valid", "loose.safetensors"))
        self.assertEqual(r.returncode, 1, r.stderr)
        path = os.path.join(CORPUS, "valid", "loose.safetensors")
        # bf16 [1, inf, nan, 2^-133]; e4m3 [448, nan, 2^-9]
        self.assertEqual(r.stdout, "abs min  abs max  metadata\n"
                                   f"                  {path}\n"
                                   "     nan      nan w\nw has nans\nw has infs\n"
                                   "     nan      nan b\nb has nans\n")
        for name in ("v1.npy", "v2.npy", "v3.npy", "fortran.npy", "bool.npy", "frames.safetensors"):
            with self.subTest(file=name):
                r = scan(os.path.join(CORPUS, "valid", name))
                self.assertIn(r.returncode, (0, 1), r.stderr)

    def test_npy_files_written_by_numpy(self):
        arrays = {
            "v1": (np.array([[-3.5, 0.25], [1e-3, 7.0]], dtype="<f4"), {}),
            "v2": (np.array([-3, 200, 7], dtype=">i2"), {"version": (2, 0)}),
            "v3": (np.array([0.5, -1e300], dtype=">f8"), {"version": (3, 0)}),
            "fortran": (np.asfortranarray(np.arange(1, 7, dtype="<f2").reshape(2, 3)), {}),
            "flags": (np.array([False, True]), {}),
            "bytes": (np.array([0, 255], dtype=np.uint8), {}),
        }
        paths = []
        for name, (a, kw) in arrays.items():
            path = os.path.join(self.dir, name + ".npy")
            with open(path, "wb") as f:
                np.lib.format.write_array(f, a, **kw)
            paths.append(path)
        r = scan(*paths)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "abs min  abs max  metadata")
        got = {line.rsplit(" ", 1)[1]: line for line in lines[1:] if not line.startswith(" " * 17)}
        for name, (a, _) in arrays.items():
            lo, hi = np.abs(a).min(), np.abs(a).max()
            self.assertEqual(got[name], f"{lo:8.2e} {hi:8.2e} {name}")

    def test_raw_bf16_needs_dtype(self):
        bits = np.array([0x3F80, 0xC2C8, 0x0000, 0x7F80], dtype="<u2")  # 1, -100, 0, inf
        void = os.path.join(self.dir, "act.npy")
        np.save(void, bits.view("V2"))
        as_u16 = os.path.join(self.dir, "act_u16.npy")
        np.save(as_u16, bits)
        r = scan(void)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--dtype", r.stderr)
        r = scan(void, as_u16, "--dtype", "bf16", "--json", os.path.join(self.dir, "s.json"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("0.00e+00      inf act\nact has infs\n", r.stdout)
        self.assertIn("0.00e+00      inf act_u16\nact_u16 has infs\n", r.stdout)
        with open(os.path.join(self.dir, "s.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["mode"], "tensors")
        stats = doc["tensors"][0]["stats"]
        self.assertEqual((stats["count"], stats["pos_inf"], stats["zero"], stats["ge_1e2"]), (4, 1, 1, 2))
        self.assertEqual(doc["tensors"][0]["tensor"]["dtype"], "BF16")
        r = scan(void, "--dtype", "f8_e4m3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("1-byte elements but the file stores 2-byte", r.stderr)

    def test_loose_safetensors_report(self):
        import torch
        path = os.path.join(self.dir, "weights.safetensors")
        dump_activations.write_safetensors(path, {
            "layer.weight": torch.tensor([0.5, -2.0], dtype=torch.bfloat16),
            "layer.bias": torch.tensor([float("nan"), 1.0]),
            "step": torch.tensor(3),
        }, {"format": "pt"})
        r = scan(path)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "abs min  abs max  metadata\n"
                                   f"                  {path}\n"
                                   "5.00e-01 2.00e+00 layer.weight\n"
                                   "     nan      nan layer.bias\nlayer.bias has nans\n"
                                   "3.00e+00 3.00e+00 step\n")

    def test_more_files_than_the_kernel_allows_mappings(self):
        # vm.max_map_count is 65530 by default: a folder of more tensor files
        # than that must scan, one mapping at a time (each file was kept mapped).
        try:
            with open("/proc/sys/vm/max_map_count") as f:
                limit = int(f.read())
        except OSError:
            limit = 65530
        n = limit + 500
        if n > 200000:
            self.skipTest(f"vm.max_map_count is {limit}: too many files to make here")
        d = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        try:
            blob = open(self.write_npy(d, np.array([1.5, -2.0], np.float32)), "rb").read()
            for i in range(n):
                with open(os.path.join(d, f"t{i:06d}.npy"), "wb") as f:
                    f.write(blob)
            r = scan(d, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            self.assertNotIn("Cannot allocate memory", r.stderr)
            self.assertIn(f"clean: {n + 1} tensors", r.stderr)
        finally:
            shutil.rmtree(d)

    def test_headroom_is_told_for_loose_tensors_too(self):
        path = os.path.join(self.dir, "h.npy")
        np.save(path, np.array([1.0, 40000.0, -3.0], np.float16))
        r = scan(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"first tensor near the F16 limit (abs max >= 0.5 of 6.55e+04): {path} (h), "
                      "abs max 4.00e+04", r.stderr)

    def test_a_loop_of_links_is_named_as_one(self):
        a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
        os.symlink(b, a)
        os.symlink(a, b)
        r = scan(a)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{a} is a loop of symbolic links", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def write_npy(self, d, a):
        path = os.path.join(d, "first.npy")
        np.save(path, a)
        return path

    def test_dumps_and_loose_files_do_not_mix(self):
        frames = os.path.join(CORPUS, "valid", "frames.safetensors")
        r = scan(frames, os.path.join(CORPUS, "valid", "v1.npy"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("scan dumps and loose tensor files in separate runs", r.stderr)
        empty = os.path.join(self.dir, "empty")
        os.mkdir(empty)
        r = scan(empty)
        self.assertEqual(r.returncode, 2)
        self.assertIn("has no .safetensors, .npy, .stats.json or replica.jsonl files", r.stderr)


SHIM = r"""
#include <stdio.h>
#include <stdlib.h>
static void mark(const char* what) {
  FILE* f = fopen(getenv("GPUDIAG_SHIM_LOG"), "a");
  if (f) { fprintf(f, "%s\n", what); fclose(f); }
}
int MPI_Init(int* c, char*** v) { mark("MPI_Init"); return 1; }
int MPI_Init_thread(int* c, char*** v, int r, int* p) { mark("MPI_Init_thread"); return 1; }
int ncclCommInitRank(void* c, int n, void* id, int r) { mark("ncclCommInitRank"); return 1; }
int ncclCommInitAll(void* c, int n, const int* d) { mark("ncclCommInitAll"); return 1; }
int ncclGetUniqueId(void* id) { mark("ncclGetUniqueId"); return 1; }
"""

PROBE = r"""
#include <mpi.h>
int main(int argc, char** argv) { MPI_Init(&argc, &argv); return 0; }
"""


class NoMpiNoNccl(unittest.TestCase):
    """An LD_PRELOAD shim records any MPI or NCCL initialisation; a real MPI
    program shows the shim works, `gpudiag scan` must never trigger it."""

    def test_scan_initialises_neither(self):
        cc, mpicc = shutil.which("cc") or shutil.which("gcc"), shutil.which("mpicc")
        if not cc or not mpicc:
            self.skipTest("needs cc and mpicc to build the interposer and its probe")
        with tempfile.TemporaryDirectory() as d:
            for name, text in (("shim.c", SHIM), ("probe.c", PROBE)):
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(d, "shim.so"), os.path.join(d, "shim.c")],
                           check=True)
            subprocess.run([mpicc, "-o", os.path.join(d, "probe"), os.path.join(d, "probe.c")], check=True)
            log = os.path.join(d, "calls.log")
            env = dict(os.environ, LD_PRELOAD=os.path.join(d, "shim.so"), GPUDIAG_SHIM_LOG=log,
                       OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="0", RANK="0", WORLD_SIZE="2")
            subprocess.run([os.path.join(d, "probe")], env=env, timeout=60)
            with open(log) as f:
                self.assertEqual(f.read(), "MPI_Init\n")  # the shim intercepts a real MPI program
            os.remove(log)
            dump = os.path.join(d, "dump")
            os.mkdir(dump)
            shutil.copy(os.path.join(CORPUS, "valid", "frames.safetensors"), dump)
            r = scan(dump, "--trace-batches", "0", env=env, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)  # the dump's f16 weight holds an inf
            self.assertIn("enc.wo Linear\n1.00e+00      inf weight\n", r.stdout)
            self.assertFalse(os.path.exists(log), "gpudiag scan initialised MPI or NCCL")


if __name__ == "__main__":
    unittest.main()
