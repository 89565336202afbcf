"""Dump a PyTorch model's activations, or just their statistics, for `gpudiag scan`.

ActivationDumper hooks every module's forward (like the overflow detector of
the debugging guide does) and, for each batch, writes the frames it saw to
`out_dir`, in one of two modes:

- mode="stats" (the default): each tensor is scanned at hook time by
  libgpudiag_scan.so through ctypes (gpudiag_scan.py; a CUDA tensor where it
  lives, on its current stream) and only its statistics are written, one
  `gpudiag-frames-stats/1` JSON file per batch (`batch-000003.stats.json`),
  a few hundred bytes per tensor;
- mode="tensors": the tensors themselves, copied to the CPU at hook time (so
  later in-place operations do not change what was recorded), in the
  `gpudiag-frames/1` format: one safetensors file per batch (split into parts
  when large), each tensor named `<frame>.<entry>|<module path>|<class
  name>|<label>`, non-tensor entries as `None` / `not a tensor` metadata,
  bit-exact (bf16 and fp8 included).

`gpudiag scan` prints the same report from either. Under a launcher (RANK or
LOCAL_RANK set, or rank= given) file names carry the rank
(`batch-000003.rank00001.stats.json`), so the ranks of a job never overwrite
each other's files, and every frame carries the time it was recorded, so
`gpudiag scan` can tell which rank went inf/nan first.
`dumper.watch("loss", loss)` records a tensor computed outside the modules
(the loss, a gradient norm) as a frame of the batch whose forward last
returned. ReplicaCheck and ReplicaDivergence (replica_check.py, importable
from here) compare data-parallel replicas' parameters every step. With stop_on_nan=True (the default, like the detector)
the dumper raises FloatingPointError at the first frame that holds a nan or
inf, after writing that batch, so keep_last can never delete the batch that
held the cause. With stop_on_nan=False the run goes on, and keep_last keeps
the first batch that held a nan or inf, and the one before it, beside the
newest ones.

In a training loop:

    from dump_activations import ActivationDumper      # scripts/ on sys.path
    dumper = ActivationDumper(model, "dumps", keep_last=2)
    ...train as usual...; dumper.close() at the end (or use `with`)

then `gpudiag scan dumps/`. Batches are 0-based counts of the model's
forward calls; a batch is written when the next forward starts (so what is
watched after the forward joins it) or at close(), which also writes the
frames of a batch that did not finish (a forward that raised), usually the
ones that matter.
"""

import json
import os
import sys
import time
import warnings

import numpy as np
import torch

from replica_check import ReplicaCheck, ReplicaDivergence  # noqa: F401  (re-exported)

FORMAT = "gpudiag-frames/1"
STATS_FORMAT = "gpudiag-frames-stats/1"


def env_rank():
    """RANK, else LOCAL_RANK, as an int; None when neither is set (one process)."""
    for name in ("RANK", "LOCAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def json_stats(s):
    """The scanner's statistics as the stats format writes them."""
    out = dict(s)
    for k in ("abs_min", "abs_max"):
        v = out[k]
        out[k] = "nan" if v != v else ("inf" if v == float("inf") else v)
    return out

# torch dtype -> (safetensors name, same-size dtype numpy understands, or None)
_DTYPES = {
    torch.float64: ("F64", None),
    torch.float32: ("F32", None),
    torch.float16: ("F16", None),
    torch.bfloat16: ("BF16", torch.int16),
    torch.int64: ("I64", None),
    torch.int32: ("I32", None),
    torch.int16: ("I16", None),
    torch.int8: ("I8", None),
    torch.uint8: ("U8", None),
    torch.bool: ("BOOL", None),
}
for _name, _st in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = (_st, torch.uint8)
for _name, _st, _as in (("uint16", "U16", torch.int16), ("uint32", "U32", torch.int32),
                        ("uint64", "U64", torch.int64)):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = (_st, _as)


def tensor_record(t):
    """(safetensors dtype, shape, little-endian bytes) of a CPU copy of `t`."""
    if t.dtype not in _DTYPES:
        raise TypeError(f"no safetensors dtype for {t.dtype}")
    name, view_as = _DTYPES[t.dtype]
    t = t.detach().cpu().contiguous()
    shape = list(t.shape)
    if view_as is not None:
        t = t.view(view_as)
    arr = t.numpy().reshape(-1)
    if sys.byteorder == "big" and arr.itemsize > 1:
        arr = arr.byteswap()
    return name, shape, arr.view(np.uint8).tobytes()


def write_safetensors(path, entries, metadata=None):
    """Writes a safetensors file atomically.

    `entries` maps names (in file order) to torch tensors or to raw
    (dtype name, shape, bytes) triples; `metadata` is a str->str dict.
    """
    header = {}
    blobs = []
    offset = 0
    for name, value in entries.items():
        dtype, shape, data = value if isinstance(value, tuple) else tensor_record(value)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for data in blobs:
            f.write(data)
    os.replace(tmp, path)


class ActivationDumper:
    """Writes every forward frame of the chosen batches to `out_dir`.

    batches: batch numbers to record (0-based), or None for all.
    keep_last: keep only the files of this many most recent batches (None: all),
        so a long run keeps the batches before a failure without filling the disk;
        the first batch that held a nan or inf, and the one before it, are kept
        beside them.
    max_file_bytes: start a new part file of the same batch beyond this size (tensors).
    mode: "stats" (statistics through libgpudiag_scan.so) or "tensors".
    rank: put this rank in the file names; default RANK or LOCAL_RANK when set.
    stop_on_nan: raise FloatingPointError at the first nan/inf, after writing its batch.
    lib: the path of libgpudiag_scan.so (default: see gpudiag_scan.py).
    """

    def __init__(self, model, out_dir, batches=None, keep_last=None, max_file_bytes=1 << 31,
                 mode="stats", rank=None, stop_on_nan=True, lib=None):
        if mode not in ("stats", "tensors"):
            raise ValueError(f"mode must be 'stats' or 'tensors', not {mode!r}")
        self.mode = mode
        self.scanner = None
        if mode == "stats":
            import gpudiag_scan  # beside this file
            self.scanner = gpudiag_scan.load(lib)
        self.rank = env_rank() if rank is None else int(rank)
        self.stop_on_nan = stop_on_nan
        self.stopped = None  # the FloatingPointError's message once raised
        self.first_bad = None  # the first batch that held a nan/inf: keep_last keeps it
        self._stats_frames = []
        self._seen = {}  # tensors mode: id -> (tensor, version, "frame.entry") of this batch
        self.model = model
        self.out_dir = os.fspath(out_dir)
        self.batches = None if batches is None else {int(b) for b in batches}
        self.keep_last = keep_last
        self.max_file_bytes = max_file_bytes
        os.makedirs(self.out_dir, exist_ok=True)
        # Shared modules keep their first name, as named_modules() lists them.
        self.module_names = {m: name for name, m in model.named_modules()}
        self.batch_number = 0
        self._frame = 0
        self._tensors = {}
        self._meta = {}
        self._bytes = 0
        self._part = 0
        self._files = []  # [(batch_number, [paths])], oldest first
        self._warned = set()
        # Like the detector: model.apply() reaches a module shared by several
        # parents once per parent, so its calls are recorded once per hook.
        self._handles = [model.register_forward_pre_hook(self._pre_hook)]
        self._returned = False  # the root's forward of this batch has returned
        model.apply(lambda m: self._handles.append(m.register_forward_hook(self._hook)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Removes the hooks and writes the frames of an unfinished batch."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._frame > 0:
            self._flush(final=True)

    def _recording(self):
        return self.batches is None or self.batch_number in self.batches

    def watch(self, name, tensor):
        """Records `tensor` (the loss, a gradient norm: anything computed
        outside the modules) as a frame `<name> watch` with one entry, `value`,
        in the batch whose forward last returned; with stop_on_nan, an inf or
        nan in it stops the run there like one in a module."""
        if self.stopped or not self._recording():
            return
        self._frame_of(name, "watch", [("value", tensor)])

    def _next_batch(self):
        """After the root's forward returned, the next forward (of the model, or
        of one of its modules called alone) starts the next batch."""
        if self._returned:
            if self._recording() and self._frame > 0:
                self._flush(final=True)
            self.batch_number += 1
            self._frame = 0
            self._returned = False

    def _pre_hook(self, module, inputs):
        self._next_batch()

    def _hook(self, module, inputs, output):
        if self.stopped:
            return
        self._next_batch()
        if self._recording():
            path = self.module_names.get(module, "?")
            self._frame_of(path, module.__class__.__name__, list(self._entries(module, inputs, output)))
        if module is self.model:
            self._returned = True

    def _frame_of(self, path, cls, entries):
        """Records one frame; with stop_on_nan raises at a nan/inf, after writing its batch."""
        bad = self._record_stats(path, cls, entries) if self.scanner else self._record(path, cls, entries)
        if bad and self.first_bad is None:
            self.first_bad = self.batch_number
        if bad and self.stop_on_nan:
            self._flush(final=True)
            self._frame = 0  # written: close() has nothing left to write
            # Under a launcher every rank writes its own files: naming this rank
            # gives the command for its report alone.
            rank = "" if self.rank is None else f" --rank {self.rank}"
            self.stopped = (f"ActivationDumper: {bad} in batch {self.batch_number}; the dump in "
                            f"{self.out_dir} holds that batch: gpudiag scan {self.out_dir}{rank}")
            raise FloatingPointError(self.stopped)

    def _entries(self, module, inputs, output):
        for name, p in module.named_parameters(recurse=False):
            yield name, p
        if isinstance(inputs, tuple):
            for i, x in enumerate(inputs):
                yield f"input[{i}]", x
        else:
            yield "input", inputs
        if isinstance(output, tuple):
            for i, x in enumerate(output):
                if isinstance(x, tuple):
                    for j, y in enumerate(x):
                        yield f"output[{i}][{j}]", y
                else:
                    yield f"output[{i}]", x
        else:
            yield "output", output

    def _record_stats(self, path, cls, frame_entries):
        """Scans the frame's tensors; returns "nan/inf in <module> <label>" for the first bad one."""
        import gpudiag_scan
        entries, bad = [], None
        for label, value in frame_entries:
            if torch.is_tensor(value):
                code = gpudiag_scan.Library.code(value.dtype)
                if code is None:
                    self._warn_dtype(value.dtype)
                    entries.append({"label": label, "kind": "not a tensor"})
                    continue
                s = self.scanner.scan(value)
                if bad is None and (s["nan"] or s["pos_inf"] or s["neg_inf"]):
                    bad = f"nan/inf in {path or 'the model'} {cls} {label}"
                entries.append({"label": label, "dtype": gpudiag_scan.NAMES[code],
                                "shape": list(value.shape), "stats": json_stats(s)})
            else:
                entries.append({"label": label, "kind": "None" if value is None else "not a tensor"})
        self._stats_frames.append({"module": path, "class": cls, "time": round(time.time(), 6),
                                   "entries": entries})
        self._frame += 1
        return bad

    def _warn_dtype(self, dtype):
        if dtype not in self._warned:
            warnings.warn(f"ActivationDumper: {dtype} has no safetensors dtype; "
                          f"recorded as 'not a tensor'")
            self._warned.add(dtype)

    def _record(self, path, cls, frame_entries):
        bad = None
        self._meta[f"time.{self._frame}"] = f"{time.time():.6f}"  # when the frame was recorded
        for index, (label, value) in enumerate(frame_entries):
            key = f"{self._frame}.{index}|{path}|{cls}|{label}"
            if torch.is_tensor(value):
                if value.dtype not in _DTYPES:
                    self._warn_dtype(value.dtype)
                    self._meta[key] = "not a tensor"
                    continue
                seen = self._seen.get(id(value))
                if seen is not None and seen[0] is value and seen[1] == value._version:
                    self._meta[key] = f"same as {seen[2]}"  # one object, unchanged: written once
                    continue
                self._seen[id(value)] = (value, value._version, f"{self._frame}.{index}")
                copy = value.detach().to("cpu", copy=True)
                if ((self.stop_on_nan or self.first_bad is None) and bad is None and copy.is_floating_point()
                        and not bool(torch.isfinite(copy).all())):
                    bad = f"nan/inf in {path or 'the model'} {cls} {label}"
                self._tensors[key] = copy
                self._bytes += copy.numel() * copy.element_size()
            elif value is None:
                self._meta[key] = "None"
            else:
                self._meta[key] = "not a tensor"
        self._frame += 1
        if self._bytes >= self.max_file_bytes:
            self._flush(final=False)
        return bad

    def _flush(self, final):
        n = self.batch_number
        base = f"batch-{n:06d}" + ("" if self.rank is None else f".rank{self.rank:05d}")
        if self.scanner:
            path = os.path.join(self.out_dir, base + ".stats.json")
            doc = {"format": STATS_FORMAT, "batch_number": n}
            if self.rank is not None:
                doc["rank"] = self.rank
            doc["frames"] = self._stats_frames
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(doc, f, separators=(",", ":"))
            os.replace(tmp, path)
            self._stats_frames = []
        else:
            name = base + (".safetensors" if final and self._part == 0
                           else f"-part-{self._part:03d}.safetensors")
            path = os.path.join(self.out_dir, name)
            meta = {"format": FORMAT, "batch_number": str(n)}
            if self.rank is not None:
                meta["rank"] = str(self.rank)
            meta.update(self._meta)
            write_safetensors(path, self._tensors, meta)
        if not self._files or self._files[-1][0] != n:
            self._files.append((n, []))
        self._files[-1][1].append(path)
        self._tensors, self._meta, self._bytes = {}, {}, 0
        if final:
            self._seen = {}
        self._part += 1
        if final:
            self._part = 0
            self._prune()

    def _prune(self):
        """Deletes all but the newest keep_last batches' files, and never the
        first batch that held a nan/inf nor the one before it (the values
        leading up to it): `gpudiag scan` leads with that batch."""
        if self.keep_last is None:
            return
        keep = {n for n, _ in self._files[-self.keep_last:]} if self.keep_last > 0 else set()
        if self.first_bad is not None:
            keep |= {self.first_bad, self.first_bad - 1}
        gone = [paths for n, paths in self._files if n not in keep]
        self._files = [(n, paths) for n, paths in self._files if n in keep]
        for paths in gone:
            for p in paths:
                try:
                    os.remove(p)
                except FileNotFoundError:
                    pass
