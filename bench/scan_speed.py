#!/usr/bin/env python3
"""Scanner speed against its anchors, side by side in one run.

Writes one .npy of SIZE GiB (fp16 by default, random normal with a few inf)
into DIR (default /dev/shm, so the page cache holds it), then times, each
REPEAT times, the median printed:
  - read:   every byte of the file read once through a mapping by all cores
            (numpy sums of uint64 views in threads): what the machine can read;
  - numpy:  the reference detector's operations on the same array
            (abs, min, max, isnan.any, isinf.any), single-threaded as numpy is;
  - gpudiag scan --device cpu, and --device cuda and auto when a GPU is there;
  - with a GPU, build/scan_gpu_bench (bench/scan_gpu_bench.cpp): the kernel on
    256 MiB already on the device vs a device-to-device cudaMemcpy of the same
    bytes (target >= 85%), and the file pipeline (pread, pinned ring, copy,
    kernel) vs cudaMemcpy from pinned memory (target >= 80%). Without a GPU
    it prints "no GPU" for these.
Rates are in GB/s of file bytes. Usage:
  bench/scan_speed.py [--gib 2] [--dtype float16] [--repeat 3] [--dir /dev/shm] [--bin build/gpudiag]
"""

import argparse
import json
import concurrent.futures as cf
import mmap
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np


def make(path, gib, dtype):
    n = (gib << 30) // np.dtype(dtype).itemsize
    rng = np.random.default_rng(1)
    a = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n,))
    step = 1 << 24
    for i in range(0, n, step):
        a[i:i + step] = rng.standard_normal(min(step, n - i), dtype=np.float32).astype(dtype)
    a[[7, n // 2, n - 1]] = np.inf
    a.flush()
    del a


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


def read_all(path):
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    words = np.frombuffer(m, dtype=np.uint64, count=len(m) // 8)
    parts = os.cpu_count() or 1
    chunk = -(-len(words) // parts)
    with cf.ThreadPoolExecutor(parts) as pool:
        list(pool.map(lambda i: int(words[i * chunk:(i + 1) * chunk].sum()), range(parts)))
    del words
    m.close()


def numpy_ops(path):
    a = np.load(path, mmap_mode="r")
    b = np.abs(a)
    b.min(), b.max(), np.isnan(a).any(), np.isinf(a).any()


def gpudiag(binary, device, path):
    r = subprocess.run([binary, "scan", "--device", device, path], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"gpudiag scan --device {device} exited {r.returncode}: {r.stderr.strip()}")


def gpu_bench(args, has_gpu):
    """The CUDA scanner against the copies that bound it (scan_gpu_bench)."""
    tool = os.path.join(os.path.dirname(args.bin) or ".", "scan_gpu_bench")
    if not has_gpu:
        print("# GPU kernel vs D2D copy, file pipeline vs pinned H2D: no GPU")
        return
    if not os.access(tool, os.X_OK):
        print(f"# GPU benchmarks: no {tool} (a build without CUDA?)")
        return
    r = subprocess.run([tool, "--repeat", str(max(args.repeat, 3)), "--dir", args.dir,
                        "--file-mib", str(min(args.gib, 2) << 10)], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"# GPU benchmarks failed (exit {r.returncode}): {r.stderr.strip()}")
        return
    d = json.loads(r.stdout)
    print(f"# {d['gpu']}")
    print(f"{'kernel, device-resident':28} {d['kernel_gbps']:7.2f} GB/s vs memory read "
          f"{d['read_gbps']:.2f} (2x D2D memcpy): {d['kernel_vs_read']:.2f}x (target >= 0.85)")
    print(f"{'file pipeline':28} {d['pipeline_gbps']:7.2f} GB/s vs pinned H2D "
          f"{d['pinned_h2d_gbps']:.2f}: {d['pipeline_vs_h2d']:.2f}x (target >= 0.80)")
    for reader in ("windows", "pread"):  # each file reader, and the path that really ran
        if f"pipeline_{reader}_gbps" in d:
            print(f"{'  reader ' + reader:28} {d[f'pipeline_{reader}_gbps']:7.2f} GB/s: "
                  f"{d[f'{reader}_vs_h2d']:.2f}x ({d[f'{reader}_path']})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib", type=int, default=2)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default="/dev/shm")
    p.add_argument("--bin", default=os.environ.get("GPUDIAG_BIN", "build/gpudiag"))
    p.add_argument("--cuda", choices=("auto", "yes", "no"), default="auto")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(dir=args.dir)
    try:
        path = os.path.join(tmp, "t.npy")
        make(path, args.gib, args.dtype)
        size = os.path.getsize(path)
        rows = [("read (mapped, all cores)", lambda: read_all(path)),
                ("numpy reference ops", lambda: numpy_ops(path)),
                ("gpudiag scan --device cpu", lambda: gpudiag(args.bin, "cpu", path))]
        has_gpu = shutil.which("nvidia-smi") and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True).returncode == 0
        if args.cuda == "yes" or (args.cuda == "auto" and has_gpu):
            rows.append(("gpudiag scan --device cuda", lambda: gpudiag(args.bin, "cuda", path)))
            rows.append(("gpudiag scan --device auto", lambda: gpudiag(args.bin, "auto", path)))
        print(f"# {size / 1e9:.2f} GB {args.dtype}, {os.cpu_count()} cores, median of {args.repeat}")
        print(f"{'what':28} {'median s':>9} {'GB/s':>7} {'min s':>7} {'max s':>7}")
        for name, fn in rows:
            fn()  # warm: page cache, CUDA context
            med, lo, hi = timed(fn, args.repeat)
            print(f"{name:28} {med:9.3f} {size / med / 1e9:7.2f} {lo:7.3f} {hi:7.3f}", flush=True)
        gpu_bench(args, has_gpu)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
