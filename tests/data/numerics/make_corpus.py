#!/usr/bin/env python3
"""Writes the reader test corpus under tests/data/numerics/corpus/.

  malformed/   one file per way a dump can be broken; MANIFEST.json maps each
               file name to a fragment of the one-line error gpudiag must print
  valid/       small well-formed files of every kind (also the fuzzers' seeds)

The files are checked in; run this script again (with numpy) after changing
it: `python3 tests/data/numerics/make_corpus.py`.
"""

import io
import json
import os
import shutil
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def st(header, data=b"", length=None):
    """safetensors bytes from a header (dict or raw text) and a data area."""
    text = header if isinstance(header, (bytes, str)) else json.dumps(header, separators=(",", ":"))
    text = text.encode("utf-8") if isinstance(text, str) else text
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def frames_meta(batch="0", **extra):
    meta = {"format": "gpudiag-frames/1", "batch_number": batch}
    meta.update(extra)
    return meta


def npy(header, data=b"", version=1, length=None):
    """.npy bytes from a header dictionary text."""
    text = header.encode("latin-1") if isinstance(header, str) else header
    n = len(text) if length is None else length
    size = struct.pack("<H", n) if version == 1 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes([version, 0]) + size + text + data


def saved(arr, **kw):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, **kw)
    return buf.getvalue()


F4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"

MALFORMED = {
    # safetensors framing
    "empty.safetensors": (b"", "too short"),
    "short_length.safetensors": (b"\x10\x00\x00", "too short"),
    "header_too_long.safetensors": (st("{}", length=1 << 40), "larger than the 100000000-byte limit"),
    "header_past_end.safetensors": (st("{}", length=4096), "runs past the end"),
    "truncated_data.safetensors": (st({"a": entry("F32", [4], 0, 16)}, b"\0" * 9), "past the end of the"),
    "trailing_data.safetensors": (st({"a": entry("F32", [1], 0, 4)}, b"\0" * 6), "cover 4 bytes of the 6"),
    # header text
    "bad_json.safetensors": (st('{"a": {"dtype": "F32",'), "not valid JSON"),
    "not_utf8.safetensors": (st(b'{"\xc3\x28": 1}'), "not valid UTF-8"),
    "not_an_object.safetensors": (st("[1, 2]"), "does not start with '{'"),
    "duplicate_key.safetensors": (st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                     '"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"), "twice"),
    "deep_nesting.safetensors": (st("{\"a\":" + "[" * 50000 + "]" * 50000 + "}"), "nested deeper"),
    # tensor entries
    "overlapping_offsets.safetensors": (st({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)},
                                           b"\0" * 8), "(overlap)"),
    "gap_in_offsets.safetensors": (st({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)},
                                      b"\0" * 12), "(gap)"),
    "shape_overflow.safetensors": (st({"a": entry("F32", [1 << 33, 1 << 33], 0, 4)}, b"\0" * 4),
                                   "overflows 64 bits"),
    "byte_size_overflow.safetensors": (st({"a": entry("F64", [1 << 62], 0, 4)}, b"\0" * 4), "byte size"),
    "size_mismatch.safetensors": (st({"a": entry("BF16", [3], 0, 4)}, b"\0" * 4), "needs 6"),
    "unknown_dtype.safetensors": (st({"a": entry("F4", [2], 0, 1)}, b"\0"), "unknown dtype \"F4\""),
    "negative_dim.safetensors": (st({"a": entry("F32", [-1], 0, 4)}, b"\0" * 4), "not a non-negative integer"),
    "float_offset.safetensors": (st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4.0]}}, b"\0" * 4),
                                 "not a non-negative integer"),
    "reversed_offsets.safetensors": (st({"a": entry("F32", [0], 4, 0)}, b"\0" * 4), "before begin"),
    "missing_dtype.safetensors": (st({"a": {"shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4), "missing \"dtype\""),
    "metadata_not_string.safetensors": (st({"__metadata__": {"format": 1}}), "is not a string"),
    # gpudiag-frames/1 on top of valid safetensors
    "frames_bad_name.safetensors": (st({"weight": entry("F32", [1], 0, 4), "__metadata__": frames_meta()},
                                       b"\0" * 4), "is not named <frame>.<entry>"),
    "frames_no_batch.safetensors": (st({"__metadata__": {"format": "gpudiag-frames/1"}}), "batch_number"),
    "frames_bad_batch.safetensors": (st({"__metadata__": frames_meta("-3")}), "not a non-negative decimal"),
    "frames_bad_entry_value.safetensors": (st({"__metadata__": frames_meta(**{"0.0|m|M|output": "nan"})}),
                                           "\"None\" or \"not a tensor\""),
    "frames_missing_frame.safetensors": (st({"1.0|m|M|output": entry("F32", [1], 0, 4),
                                             "__metadata__": frames_meta()}, b"\0" * 4), "frame 0 is missing"),
    "frames_future_version.safetensors": (st({"__metadata__": {"format": "gpudiag-frames/2"}}),
                                          "unsupported dump format"),
    # npy
    "bad_magic.npy": (b"\x93NUMPX\x01\x00" + b"\0" * 20, "not a .npy file"),
    "version_9.npy": (npy(F4, b"\0" * 8, version=9), "unsupported .npy format version 9.0"),
    "npy_header_too_long.npy": (npy(F4, b"\0" * 8, version=2, length=0xFFFFFFFF), "larger than the"),
    "npy_header_past_end.npy": (npy(F4, version=1, length=4000), "runs past the end"),
    "npy_bad_dict.npy": (npy("{'descr': '<f4' 'fortran_order': False}", b"\0" * 8), "expected ',' or '}'"),
    "npy_missing_key.npy": (npy("{'descr': '<f4', 'shape': (2,), }", b"\0" * 8), "lacks"),
    "npy_extra_key.npy": (npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", b"\0" * 8),
                          "unexpected key"),
    "npy_object.npy": (saved(np.array([1, "a", None], dtype=object), allow_pickle=True), "object arrays"),
    "npy_structured.npy": (saved(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")])), "structured"),
    "npy_complex.npy": (saved(np.zeros(2, dtype=np.complex64)), "unsupported element type"),
    "npy_strings.npy": (saved(np.array(["ab", "c"])), "unsupported element type"),
    "npy_truncated.npy": (saved(np.arange(10, dtype=np.float32))[:-3], "(truncated?)"),
    "npy_trailing.npy": (saved(np.arange(10, dtype=np.float32)) + b"xx", "(trailing bytes)"),
    "npy_shape_overflow.npy": (npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967297), }"),
                               "overflows 64 bits"),
    "npy_negative_dim.npy": (npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", b"\0" * 8),
                             "non-negative"),
    "npy_raw_void.npy": (npy("{'descr': '|V2', 'fortran_order': False, 'shape': (2,), }", b"\0" * 4),
                         "raw 2-byte elements"),
    "npy_v3_not_utf8.npy": (npy(b"{'descr': '<f4\xff', 'fortran_order': False, 'shape': (2,), }", b"\0" * 8,
                                version=3), "not valid UTF-8"),
}


def valid():
    bf16_bits = np.array([0x3F80, 0x7F80, 0xFFC0, 0x0001], dtype="<u2").tobytes()
    yield "loose.safetensors", st({"w": entry("BF16", [2, 2], 0, 8), "b": entry("F8_E4M3", [3], 8, 11),
                                   "__metadata__": {"format": "pt"}}, bf16_bits + b"\x7e\x7f\x01")
    frames = {"0.0|enc.wo|Linear|weight": entry("F16", [2], 0, 4), "0.1|enc.wo|Linear|input[0]": entry("F32", [1], 4, 8),
              "1.0||Model|input[0]": entry("I64", [1], 8, 16),
              "__metadata__": frames_meta(**{"0.2|enc.wo|Linear|output": "None", "1.1||Model|output": "not a tensor"})}
    yield "frames.safetensors", st(frames, b"\x00\x3c\x00\x7c" + struct.pack("<f", 2.5) + struct.pack("<q", -9))
    yield "v1.npy", saved(np.array([[1.5, -np.inf], [0.0, 3.0]], dtype=np.float32))
    yield "v2.npy", saved(np.arange(6, dtype=">i4").reshape(2, 3), version=(2, 0))
    yield "v3.npy", saved(np.array([np.nan, 1.0], dtype=">f8"), version=(3, 0))
    yield "fortran.npy", saved(np.asfortranarray(np.ones((3, 2), dtype=np.float16)))
    yield "bool.npy", saved(np.array([True, False]))


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    for sub in ("malformed", "valid"):
        os.makedirs(os.path.join(OUT, sub))
    manifest = {}
    for name, (data, fragment) in MALFORMED.items():
        with open(os.path.join(OUT, "malformed", name), "wb") as f:
            f.write(data)
        manifest[name] = fragment
    with open(os.path.join(OUT, "malformed", "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, data in valid():
        with open(os.path.join(OUT, "valid", name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
