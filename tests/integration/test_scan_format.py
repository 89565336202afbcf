"""Every abs min/abs max that `gpudiag scan` prints must equal Python's own
f"{x:8.2e}" of the value the framework would hand it. Checked on every bit
pattern of the 8- and 16-bit types and on random, tie-breaking and extreme
values of the wider ones, one single-element tensor per value (so abs min
== abs max == |x|)."""

import os
import random
import struct
import tempfile
import unittest

import numpy as np

from scanlib import dump_activations, scan


def fp8_value(bits, exp_bits, man_bits, fn):
    """Decodes an OCP fp8 pattern (E4M3 'fn': no inf, one NaN; E5M2: IEEE-like)."""
    sign = -1.0 if bits & 0x80 else 1.0
    e = (bits >> man_bits) & ((1 << exp_bits) - 1)
    m = bits & ((1 << man_bits) - 1)
    bias = (1 << (exp_bits - 1)) - 1
    top = (1 << exp_bits) - 1
    if fn and e == top and m == (1 << man_bits) - 1:
        return float("nan")
    if not fn and e == top:
        return sign * float("inf") if m == 0 else float("nan")
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - man_bits)
    return sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)


def float_cases(rng):
    """(safetensors dtype, little-endian bytes of one element, the value as a Python float)."""
    for bits in range(1 << 16):
        raw = struct.pack("<H", bits)
        yield "F16", raw, float(np.frombuffer(raw, "<f2")[0])
        yield "BF16", raw, struct.unpack("<f", b"\0\0" + raw)[0]
    for bits in range(256):
        yield "F8_E4M3", bytes([bits]), fp8_value(bits, 4, 3, True)
        yield "F8_E5M2", bytes([bits]), fp8_value(bits, 5, 2, False)
    wide = [i / 1024 for i in range(1, 12000)] + [10.0 ** k for k in range(-45, 39)]
    wide += [9.995, 0.0995, 1.005, 2.675, 1.115, 9.9949999, 9.9950001, 999.5, 0.1, 1 / 3]
    wide += [struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(15000)]
    wide += [3.4028234663852886e38, 1.1754943508222875e-38, 1.401298464324817e-45, 65504.0, 448.0, 57344.0]
    for x in wide:
        for sign in (1, -1):
            yield "F32", struct.pack("<f", sign * x), float(np.float32(sign * x))
    doubles = wide + [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(15000)]
    doubles += [1.7976931348623157e308, 2.2250738585072014e-308, 5e-324, 1e300, 1e-300, 0.0, -0.0]
    for x in doubles:
        yield "F64", struct.pack("<d", x), x


def int_cases(rng):
    """(dtype, bytes, the framework's abs() of the element as a Python int)."""
    types = {"I8": np.int8, "U8": np.uint8, "I16": np.int16, "U16": np.uint16, "I32": np.int32,
             "U32": np.uint32, "I64": np.int64, "U64": np.uint64}
    for name, t in types.items():
        info = np.iinfo(t)
        bits = np.dtype(t).itemsize * 8
        if bits <= 16:
            values = list(range(info.min, info.max + 1))
        else:
            values = [info.min, info.max, 0, 1, 99, 100, 101, 9995, 2 ** 53 + 1, 2 ** 24 + 1]
            values += [rng.randrange(info.min, info.max + 1) for _ in range(3000)]
        for v in values:
            if info.min <= v <= info.max:
                a = np.array([v], dtype=t)
                yield name, a.astype("<" + a.dtype.str[1:]).tobytes(), int(np.abs(a)[0])  # wraps like torch
    yield "BOOL", b"\x00", 0
    yield "BOOL", b"\x01", 1


class Format(unittest.TestCase):
    def check(self, cases, formatted):
        by_dtype = {}
        for dtype, raw, value in cases:
            by_dtype.setdefault(dtype, []).append((raw, value))
        with tempfile.TemporaryDirectory() as d:
            for dtype, items in by_dtype.items():
                entries = {f"v{i}": (dtype, [1], raw) for i, (raw, _) in enumerate(items)}
                path = os.path.join(d, f"{dtype}.safetensors")
                dump_activations.write_safetensors(path, entries)
                r = scan(path)
                self.assertIn(r.returncode, (0, 1), r.stderr)
                printed = {}
                for line in r.stdout.splitlines()[2:]:
                    if not line.endswith((" has nans", " has infs")):
                        printed[line.rsplit(" ", 1)[1]] = line
                self.assertEqual(len(printed), len(items), dtype)
                bad = []
                for i, (raw, value) in enumerate(items):
                    want = f"{formatted(value)} {formatted(value)} v{i}"
                    if printed[f"v{i}"] != want:
                        bad.append((raw.hex(), value, printed[f"v{i}"], want))
                self.assertEqual(bad[:10], [], f"{dtype}: {len(bad)} of {len(items)} values differ")

    def test_floats_print_like_python(self):
        self.check(float_cases(random.Random(7)), lambda x: f"{abs(x):8.2e}")

    def test_integers_print_like_python(self):
        self.check(int_cases(random.Random(8)), lambda v: f"{v:8.2e}")


if __name__ == "__main__":
    unittest.main()
