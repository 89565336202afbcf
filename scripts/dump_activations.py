"""Dump a PyTorch model's activations for `gpudiag scan`.

ActivationDumper hooks every module's forward (like the overflow detector of
the debugging guide does) and, for each batch, writes the frames it saw to
`out_dir` in the `gpudiag-frames/1` format: one safetensors file per batch
(split into parts when large), each tensor named
`<frame>.<entry>|<module path>|<class name>|<label>`, non-tensor entries as
`None` / `not a tensor` metadata. Tensors are copied to the CPU at hook time,
so later in-place operations do not change what was recorded, and written
bit-exact (bf16 and fp8 included). Needs only torch and numpy.

In a training loop:

    from dump_activations import ActivationDumper      # scripts/ on sys.path
    dumper = ActivationDumper(model, "dumps", keep_last=2)
    ...train as usual...; dumper.close() at the end (or use `with`)

then `gpudiag scan dumps/`. A batch ends when the model's own forward
returns, as in the reference detector; close() also writes the frames of a
batch that did not finish (a forward that raised), which are usually the
ones that matter.
"""

import json
import os
import sys
import warnings

import numpy as np
import torch

FORMAT = "gpudiag-frames/1"

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
        so a long run keeps the batches before a failure without filling the disk.
    max_file_bytes: start a new part file of the same batch beyond this size.
    """

    def __init__(self, model, out_dir, batches=None, keep_last=None, max_file_bytes=1 << 31):
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
        self._handles = []
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

    def _hook(self, module, inputs, output):
        recording = self._recording()
        if recording:
            self._record(module, inputs, output)
        if module is self.model:
            if recording:
                self._flush(final=True)
            self.batch_number += 1
            self._frame = 0

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

    def _record(self, module, inputs, output):
        path = self.module_names.get(module, "?")
        cls = module.__class__.__name__
        for index, (label, value) in enumerate(self._entries(module, inputs, output)):
            key = f"{self._frame}.{index}|{path}|{cls}|{label}"
            if torch.is_tensor(value):
                if value.dtype not in _DTYPES:
                    if value.dtype not in self._warned:
                        warnings.warn(f"ActivationDumper: {value.dtype} has no safetensors dtype; "
                                      f"recorded as 'not a tensor'")
                        self._warned.add(value.dtype)
                    self._meta[key] = "not a tensor"
                    continue
                copy = value.detach().to("cpu", copy=True)
                self._tensors[key] = copy
                self._bytes += copy.numel() * copy.element_size()
            elif value is None:
                self._meta[key] = "None"
            else:
                self._meta[key] = "not a tensor"
        self._frame += 1
        if self._bytes >= self.max_file_bytes:
            self._flush(final=False)

    def _flush(self, final):
        n = self.batch_number
        if final and self._part == 0:
            name = f"batch-{n:06d}.safetensors"
        else:
            name = f"batch-{n:06d}-part-{self._part:03d}.safetensors"
        path = os.path.join(self.out_dir, name)
        meta = {"format": FORMAT, "batch_number": str(n)}
        meta.update(self._meta)
        write_safetensors(path, self._tensors, meta)
        if not self._files or self._files[-1][0] != n:
            self._files.append((n, []))
        self._files[-1][1].append(path)
        self._tensors, self._meta, self._bytes = {}, {}, 0
        self._part += 1
        if final:
            self._part = 0
            self._prune()

    def _prune(self):
        if self.keep_last is None:
            return
        while len(self._files) > self.keep_last:
            _, paths = self._files.pop(0)
            for p in paths:
                try:
                    os.remove(p)
                except FileNotFoundError:
                    pass
