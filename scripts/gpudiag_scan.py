"""gpudiag's scanner from Python through ctypes: libgpudiag_scan.so (the C ABI
of `gpudiag/scan.h`), no compiled extension. `load()` finds the library;
`Library.scan(tensor)` returns the statistics of one torch tensor, scanned
where it lives: a CPU tensor at its data pointer, a CUDA tensor on its device
on the current stream of that device (no copy to the host).
`Library.checksums(tensors)` returns the replica checksum (64-bit, of the
bytes) of each of many tensors: one library call for the CPU tensors, one per
GPU for the others (one kernel launch each).

Where the library is looked for, first found wins: the `path` given, then
$GPUDIAG_SCAN_LIB, then libgpudiag_scan.so in $GPUDIAG_BUILD_DIR, beside
the gpudiag on PATH, and in build/ of this checkout."""

import ctypes
import os
import shutil

import torch

ABI_VERSION = 1

# torch dtype -> gpudiag_dtype (enum order of gpudiag/scan.h)
_CODES = {
    torch.float64: 0, torch.float32: 1, torch.float16: 2, torch.bfloat16: 3,
    torch.int64: 6, torch.int32: 7, torch.int16: 8, torch.int8: 9, torch.uint8: 13, torch.bool: 14,
}
for _name, _code in (("float8_e4m3fn", 4), ("float8_e5m2", 5), ("uint64", 10), ("uint32", 11),
                     ("uint16", 12)):
    if hasattr(torch, _name):
        _CODES[getattr(torch, _name)] = _code
NAMES = {0: "F64", 1: "F32", 2: "F16", 3: "BF16", 4: "F8_E4M3", 5: "F8_E5M2", 6: "I64", 7: "I32",
         8: "I16", 9: "I8", 10: "U64", 11: "U32", 12: "U16", 13: "U8", 14: "BOOL"}
FIELDS = ("count", "abs_min", "abs_max", "nan", "pos_inf", "neg_inf", "zero", "subnormal",
          "ge_1e2", "ge_1e3", "ge_1e4")


class Stats(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("abs_min", ctypes.c_double),
                ("abs_max", ctypes.c_double)] + [(f, ctypes.c_uint64) for f in FIELDS[3:]]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("count", ctypes.c_uint64), ("dtype", ctypes.c_int32),
                ("reserved", ctypes.c_int32)]


class ScanError(RuntimeError):
    """The library refused or failed a scan; the message is its reason."""


def candidates(path=None):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = [path, os.environ.get("GPUDIAG_SCAN_LIB")]
    if os.environ.get("GPUDIAG_BUILD_DIR"):
        found.append(os.path.join(os.environ["GPUDIAG_BUILD_DIR"], "libgpudiag_scan.so"))
    binary = shutil.which("gpudiag")
    if binary:
        found.append(os.path.join(os.path.dirname(os.path.realpath(binary)), "libgpudiag_scan.so"))
    found.append(os.path.join(here, "build", "libgpudiag_scan.so"))
    return [p for p in found if p]


class Library:
    def __init__(self, path):
        self.path = path
        lib = ctypes.CDLL(path)
        lib.gpudiag_scan_abi_version.restype = ctypes.c_int
        lib.gpudiag_scan_version.restype = ctypes.c_char_p
        lib.gpudiag_scan_last_error.restype = ctypes.c_char_p
        lib.gpudiag_scan_host.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                                          ctypes.POINTER(Stats)]
        lib.gpudiag_scan_device.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                                            ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(Stats)]
        self.has_checksums = hasattr(lib, "gpudiag_scan_checksums")
        if self.has_checksums:
            lib.gpudiag_scan_checksums.argtypes = [ctypes.POINTER(Tensor), ctypes.c_uint64, ctypes.c_int,
                                                   ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                                   ctypes.POINTER(Stats)]
        if lib.gpudiag_scan_abi_version() != ABI_VERSION:
            raise ScanError(f"{path} speaks scan ABI {lib.gpudiag_scan_abi_version()}, "
                            f"this script {ABI_VERSION}: use the scripts of the same gpudiag")
        self.lib = lib
        self.version = lib.gpudiag_scan_version().decode()

    @staticmethod
    def code(dtype):
        return _CODES.get(dtype)

    def scan(self, t):
        """{field: value} of tensor `t` (abs_min/abs_max are floats, nan/inf included)."""
        code = _CODES.get(t.dtype)
        if code is None:
            raise ScanError(f"no scanner dtype for {t.dtype}")
        t = t.detach()
        if not t.is_contiguous():
            t = t.contiguous()  # the scan reads one flat buffer
        out = Stats()
        if t.is_cuda:
            stream = torch.cuda.current_stream(t.device).cuda_stream
            rc = self.lib.gpudiag_scan_device(ctypes.c_void_p(t.data_ptr()), t.numel(), code,
                                              ctypes.c_void_p(stream), t.device.index or 0,
                                              ctypes.byref(out))
        elif t.device.type == "cpu":
            rc = self.lib.gpudiag_scan_host(ctypes.c_void_p(t.data_ptr()), t.numel(), code,
                                            ctypes.byref(out))
        else:
            t = t.cpu()
            rc = self.lib.gpudiag_scan_host(ctypes.c_void_p(t.data_ptr()), t.numel(), code,
                                            ctypes.byref(out))
        if rc != 0:
            raise ScanError(self.lib.gpudiag_scan_last_error().decode(errors="replace"))
        return {f: getattr(out, f) for f in FIELDS}


    def checksums(self, tensors):
        """The replica checksum of each tensor (ints below 2**64), in order.

        CPU tensors go in one call, every core; CUDA tensors in one call per
        device, on that device's current stream. A non-contiguous tensor is
        made contiguous first (a copy); the checksum covers its bytes."""
        if not self.has_checksums:
            raise ScanError(f"{self.path} has no gpudiag_scan_checksums: rebuild gpudiag (the "
                            f"library is older than this script)")
        out = [0] * len(tensors)
        by_device, keep = {}, []
        for i, t in enumerate(tensors):
            code = _CODES.get(t.dtype)
            if code is None:
                raise ScanError(f"no scanner dtype for {t.dtype}")
            t = t.detach()
            if not t.is_contiguous():
                t = t.contiguous()
            if t.device.type not in ("cpu", "cuda"):
                t = t.cpu()
            keep.append(t)  # alive until the call returns
            device = t.device.index if t.is_cuda else -1
            by_device.setdefault(device, []).append((i, t, code))
        for device, items in by_device.items():
            n = len(items)
            table = (Tensor * n)(*[Tensor(t.data_ptr(), t.numel(), code, 0) for _, t, code in items])
            sums = (ctypes.c_uint64 * n)()
            stream = torch.cuda.current_stream(device).cuda_stream if device >= 0 else None
            rc = self.lib.gpudiag_scan_checksums(table, n, device, ctypes.c_void_p(stream), sums, None)
            if rc != 0:
                raise ScanError(self.lib.gpudiag_scan_last_error().decode(errors="replace"))
            for k, (i, _, _) in enumerate(items):
                out[i] = sums[k]
        return out


def load(path=None):
    """The library at `path` when given, else the first of candidates() that
    loads; ScanError naming where it looked."""
    tried = []
    for p in ([path] if path else candidates()):
        if os.path.isfile(p):
            try:
                return Library(p)
            except OSError as e:
                tried.append(f"{p} ({e})")
        else:
            tried.append(f"{p} (absent)")
    raise ScanError("libgpudiag_scan.so not found: looked at " + ", ".join(tried) +
                    "; build gpudiag (scripts/build.sh) or set GPUDIAG_SCAN_LIB")
