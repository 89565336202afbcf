"""Shared pieces of the `gpudiag scan` integration tests.

- `scan(...)` runs the real binary.
- `LiveDetector` is a forward-hook overflow detector that prints what the
  reference detector of the debugging guide prints (same frame ring, batch
  counting, markers, `has nans`/`has infs` lines and report), computing every
  value with torch itself: `f"{t.abs().min():8.2e}"`. The tests compare
  `gpudiag scan` on a dump with what this detector printed on the same run.
- `DumpBuilder` writes `gpudiag-frames/1` files from frames given in Python
  and feeds the same frames to a LiveDetector for the expected report.
"""

import collections
import os
import subprocess
import sys

SOURCE_DIR = os.environ.get("GPUDIAG_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD_DIR = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
GPUDIAG = os.environ.get("GPUDIAG_BIN", os.path.join(BUILD_DIR, "gpudiag"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))

import torch  # noqa: E402  (Debian's python3-torch)
import dump_activations  # noqa: E402

PREFIX = " " * 17


def scan(*args, timeout=300, env=None):
    """Runs `gpudiag scan ARGS`; returns the CompletedProcess (text mode)."""
    return subprocess.run([GPUDIAG, "scan", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


class DetectorStop(Exception):
    """Raised where the reference detector raises its ValueError."""


class LiveDetector:
    """The overflow detector's behaviour, hook by hook.

    One deliberate difference from the reference, matching gpudiag: when the
    frame ring is emptied in trace mode it stays bounded by max_frames (the
    reference replaces it with an unbounded list).
    """

    def __init__(self, model=None, max_frames=21, trace_batches=(), abort_after=None):
        self.max_frames = max_frames
        self.trace_batches = set(trace_batches)
        self.abort_after = abort_after
        self.ring = collections.deque([], max_frames)
        self.pending = []  # lines of the frame being built
        self.batch = 0
        self.calls = 0
        self.detected = False
        self.out = []  # what print() would have written, one string per call
        self.model = model
        self.handles = []
        if model is not None:
            self.names = {m: n for n, m in model.named_modules()}
            model.apply(lambda m: self.handles.append(m.register_forward_hook(self.hook)))

    def close(self):
        for h in self.handles:
            h.remove()

    def text(self):
        return "".join(s + "\n" for s in self.out)

    def _start_batch_lines(self):
        self.pending.append(f"\n\n{PREFIX} *** Starting batch number={self.batch} ***")
        self.pending.append(f"{'abs min':8} {'abs max':8} metadata")

    def _entry(self, value, label):
        if torch.is_tensor(value):
            a = value.abs()
            self.pending.append(f"{a.min():8.2e} {a.max():8.2e} {label}")
            if torch.isnan(value).any().item():
                self.out.append(f"{label} has nans")
                self.detected = True
            if torch.isinf(value).any().item():
                self.out.append(f"{label} has infs")
                self.detected = True
        elif value is None:
            self.pending.append(f"{'None':>17} {label}")
        else:
            self.pending.append(f"{'not a tensor':>17} {label}")

    def frame(self, path, cls, entries, is_root):
        """One finished forward call: entries are (label, value) pairs."""
        tracing = self.batch in self.trace_batches
        if tracing:
            self.ring = collections.deque([], self.max_frames)
        if self.calls == 0:
            self._start_batch_lines()
        self.calls += 1
        if is_root:
            self.batch += 1
        self.pending.append(f"{PREFIX} {path} {cls}")
        for label, value in entries:
            self._entry(value, label)
        self.ring.append("\n".join(self.pending))
        self.pending = []
        if tracing:
            self.out.append("\n".join(self.ring))
            self.ring = collections.deque([], self.max_frames)
        if is_root:
            self._start_batch_lines()
        if self.detected and not tracing:
            self.out.append(f"\nDetected inf/nan during batch_number={self.batch}")
            self.out.append(f"Last {len(self.ring)} forward frames:")
            self.out.append(f"{'abs min':8} {'abs max':8} metadata")
            self.out.append("\n".join(self.ring))
            self.out.append("\n\n")
            self.ring = collections.deque([], self.max_frames)
            raise DetectorStop("inf/nan detected")
        if self.abort_after is not None and self.batch > self.abort_after:
            raise DetectorStop(f"aborting after {self.batch} batches")

    def hook(self, module, inputs, output):
        entries = list(frame_entries(module, inputs, output))
        self.frame(self.names[module], module.__class__.__name__, entries, module is self.model)


def frame_entries(module, inputs, output):
    """(label, value) of a frame: parameters, inputs, outputs (nested tuples one level).
    Written apart from dump_activations.py on purpose: the live detector here is
    the oracle the dumper's output is compared with."""
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


class DumpBuilder:
    """Writes frames dumps by hand and computes the expected report.

    add_frame(batch, path, cls, entries) appends one frame of `batch`;
    write(dir, split) writes each batch's frames, `split` files per batch
    (frames dealt round-robin); expected(...) replays the same frames through
    a LiveDetector and returns its text.
    """

    def __init__(self):
        self.batches = collections.OrderedDict()

    def add_frame(self, batch, path, cls, entries):
        self.batches.setdefault(batch, []).append((path, cls, list(entries)))

    def write(self, out_dir, split=1):
        os.makedirs(out_dir, exist_ok=True)
        for batch, frames in self.batches.items():
            parts = [({}, {"format": dump_activations.FORMAT, "batch_number": str(batch)}) for _ in range(split)]
            for f, (path, cls, entries) in enumerate(frames):
                tensors, meta = parts[f % split]
                for e, (label, value) in enumerate(entries):
                    key = f"{f}.{e}|{path}|{cls}|{label}"
                    if torch.is_tensor(value):
                        tensors[key] = value
                    else:
                        meta[key] = "None" if value is None else "not a tensor"
            for k, (tensors, meta) in enumerate(parts):
                name = f"batch-{batch:04d}-{k}.safetensors"
                dump_activations.write_safetensors(os.path.join(out_dir, name), tensors, meta)

    def expected(self, **options):
        det = LiveDetector(**options)
        try:
            for frames in self.batches.values():
                for path, cls, entries in frames:
                    det.frame(path, cls, entries, path == "")
        except DetectorStop:
            pass
        return det.text()
