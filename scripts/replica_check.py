"""Replica divergence: find the data-parallel replica whose parameters silently
changed (a bad GPU's silent data corruption), every step, for `gpudiag scan`
and `gpudiag launch`.

In data-parallel training every replica holds bit-identical parameters after
each optimizer step, so a replica that differs is a corrupted one.
`ReplicaCheck(model, out_dir)` with `.step(step)` after `optimizer.step()`:

1. computes one 64-bit checksum per parameter with libgpudiag_scan.so
   (gpudiag_scan.py: one call for the CPU's tensors, one kernel launch per GPU,
   where the tensors live; the algorithm is in docs/formats.md);
2. appends them to `out_dir/rank00003.replica.jsonl` (one header line, then
   one line per checked step: 17 bytes per tensor), for `gpudiag scan out_dir`;
3. when a process group is up, all-gathers the checksums over the replica
   group (one small collective) and, when they differ, raises
   ReplicaDivergence on every rank, its message starting
   `replicas diverged at step S: rank R differs from ranks ...`: the majority
   decides which replica is wrong; two replicas that disagree are said to,
   and that a third replica would decide.
   The first differing tensors' values are then gathered (only then) to say
   how far apart they are: bits that differ and the largest |difference|.

The replica group is `group`, else the DDP model's `process_group`, else the
default group. Parameters DDP ignores are skipped; buffers are not compared
(BatchNorm's running statistics differ between healthy replicas). Sharded
parameters (FSDP, ZeRO-3, DTensor, tensor parallel) hold different data on
each rank: without a `group` of ranks that hold the same shards they raise
ValueError at construction.
"""

import hashlib
import json
import os
from collections import Counter

import torch

FORMAT = "gpudiag-replica-sums/1"
DETAIL_TENSORS = 3  # tensors whose values are gathered to say how far apart they are
DETAIL_MAX_BYTES = 256 << 20  # larger ones are named without their values


class ReplicaDivergence(RuntimeError):
    """The replicas' parameters differ. `step`, `rank` (the replica the
    majority says is wrong, None without a majority), `tensors` (names)."""

    def __init__(self, message, step, rank, tensors):
        super().__init__(message)
        self.step, self.rank, self.tensors = step, rank, tensors


def ranks_text(ranks):
    """[0, 1, 2, 5] -> "ranks 0-2,5"; [3] -> "rank 3" (cut with ",..." past 80
    characters, as gpudiag's C++ says it)."""
    ranks = sorted(ranks)
    out, i = "", 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out += ("," if out else "") + (str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
        if len(out) > 80 and i < len(ranks):
            out += ",..."
            break
    return ("rank " if len(ranks) == 1 else "ranks ") + out


def verdict(step, ranks, names, rows, details=None):
    """The divergence message for one step, or None when every row agrees.

    ranks[i] holds rows[i], its checksums in the order of `names`. The rows
    held by more ranks than any other are the majority; the lowest rank that
    differs from it is R. Without a majority (two replicas, or a tie) no rank
    is named. `details` maps a tensor index to what to say after its name.
    Returns (message, R or None, indices of the differing tensors)."""
    rows = [tuple(r) for r in rows]
    counts = Counter(rows).most_common()
    if len(counts) <= 1:
        return None
    details = details or {}

    def listed(indices):
        shown = [names[i] + (f" ({details[i]})" if i in details else "") for i in indices[:DETAIL_TENSORS]]
        more = f" and {len(indices) - DETAIL_TENSORS} more" if len(indices) > DETAIL_TENSORS else ""
        return f"in {len(indices)} of {len(names)} tensors: " + ", ".join(shown) + more

    head = f"replicas diverged at step {step}: "
    if counts[0][1] > counts[1][1]:
        majority = counts[0][0]
        good = [r for r, row in zip(ranks, rows) if row == majority]
        wrong = sorted(r for r, row in zip(ranks, rows) if row != majority)
        bad_row = rows[ranks.index(wrong[0])]
        differ = [i for i in range(len(names)) if bad_row[i] != majority[i]]
        also = ""
        if len(wrong) > 1:
            others = wrong[1:]
            also = f" (so do{'es' if len(others) == 1 else ''} {ranks_text(others)})"
        return (f"{head}rank {wrong[0]} differs from {ranks_text(good)}{also} {listed(differ)}",
                wrong[0], differ)
    # No majority: name the sets of ranks that agree among themselves.
    sets = sorted(([r for r, row in zip(ranks, rows) if row == value] for value, _ in counts),
                  key=lambda s: min(s))
    a, b = rows[ranks.index(sets[0][0])], rows[ranks.index(sets[1][0])]
    differ = [i for i in range(len(names)) if a[i] != b[i]]
    held = " vs ".join(ranks_text(s) for s in sets)
    two = " (2 replicas: a third would decide)" if len(ranks) == 2 else ""  # none outvotes the other
    return (f"{head}{held}, no majority says which is wrong{two}, {listed(differ)}", None, differ)


def _sharded(name, p):
    """Why `p` holds only part of a parameter on this rank, or None."""
    kind = type(p).__name__
    if kind == "DTensor" or hasattr(p, "_local_tensor"):
        return "a DTensor"
    if kind == "FlatParameter" or getattr(p, "_is_flat_param", False):
        return "an FSDP flat parameter"
    if hasattr(p, "ds_id") or hasattr(p, "ds_tensor"):
        return "a ZeRO-3 partition"
    if getattr(p, "tensor_model_parallel", False):
        return "tensor parallel"
    return None


def _local(p):
    """The part of parameter `p` this rank holds: a DTensor's local shard,
    a ZeRO-3 parameter's partition, else `p` itself."""
    if hasattr(p, "to_local"):
        return p.to_local()
    return getattr(p, "ds_tensor", p)


def _world_and_rank():
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist, dist.get_rank()
    for name in ("RANK", "LOCAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return None, int(os.environ[name])
    return None, None


class ReplicaCheck:
    """Checks, every `every` steps, that the replicas' parameters are identical.

    model: the DDP-wrapped model (or the module itself with `group`).
    out_dir: where this rank's checksums are appended (rank00003.replica.jsonl).
    group: the process group of the replicas (default: the DDP model's
        process_group, else the default group); required for sharded parameters.
    lib: the path of libgpudiag_scan.so (default: see gpudiag_scan.py).
    """

    def __init__(self, model, out_dir, every=1, group=None, lib=None):
        import gpudiag_scan  # beside this file
        self.lib = gpudiag_scan.load(lib)
        self.every = max(1, int(every))
        inner = getattr(model, "module", model)
        ignored = set(getattr(model, "parameters_to_ignore", None) or ())
        self.params = [(n, p) for n, p in inner.named_parameters() if n not in ignored]
        self.dist, self.rank = _world_and_rank()
        fsdp = any(type(m).__name__ == "FullyShardedDataParallel" for m in model.modules())
        if group is None:
            why = [(n, w) for n, p in self.params for w in [_sharded(n, p)] if w]
            if fsdp or why:
                what = f"{why[0][0]} is {why[0][1]}" if why else "the model is FSDP-wrapped"
                raise ValueError(
                    f"ReplicaCheck: {what}: sharded parameters differ between ranks by design; "
                    f"pass group= the process group of the ranks that hold the same shards "
                    f"(the replicate group of HSDP, the data-parallel group of Megatron)")
            group = getattr(model, "process_group", None)
        self.group = group
        self.group_ranks = None
        if self.dist is not None:
            self.group_ranks = self._gather_ints([self.rank])[:, 0].tolist()
        self.names = [n for n, _ in self.params]
        layout = [(n, str(p.dtype), list(p.shape)) for n, p in self.params]
        self.digest = int.from_bytes(hashlib.blake2b(json.dumps(layout).encode(), digest_size=7).digest(),
                                     "little")
        os.makedirs(out_dir, exist_ok=True)
        name = "replica.jsonl" if self.rank is None else f"rank{self.rank:05d}.replica.jsonl"
        self.path = os.path.join(os.fspath(out_dir), name)
        header = {"format": FORMAT, "rank": self.rank, "group": self.group_ranks, "every": self.every,
                  "tensors": [{"name": n, "dtype": str(p.dtype).replace("torch.", ""), "shape": list(p.shape)}
                              for n, p in self.params]}
        self.file = open(self.path, "a")
        self.file.write(json.dumps(header, separators=(",", ":")) + "\n")
        self.file.flush()

    def close(self):
        self.file.close()

    def _device(self):
        backend = self.dist.get_backend(self.group) if self.group is not None else self.dist.get_backend()
        return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")

    def _gather_ints(self, values):
        """All-gathers a row of int64s over the group: a [group size, len] CPU tensor."""
        mine = torch.tensor(values, dtype=torch.int64, device=self._device())
        rows = [torch.empty_like(mine) for _ in range(self.dist.get_world_size(self.group))]
        self.dist.all_gather(rows, mine, group=self.group)
        return torch.stack(rows).cpu()

    def step(self, step):
        """Checksums the parameters after optimizer.step(); raises
        ReplicaDivergence on every rank when the replicas differ."""
        if step % self.every:
            return
        sums = self.lib.checksums([_local(p) for _, p in self.params])
        self.file.write('{"step":%d,"sums":[%s]}\n' % (step, ",".join('"%016x"' % s for s in sums)))
        self.file.flush()
        if self.dist is None:
            return
        signed = [s - (1 << 64) if s >= 1 << 63 else s for s in sums]
        rows = self._gather_ints([self.digest] + signed)
        if bool((rows[:, 0] != rows[0, 0]).any()):
            raise ValueError(f"ReplicaCheck: {ranks_text(self.group_ranks)} hold different parameter "
                             f"lists (names, dtypes, shapes): is the model pipeline or tensor parallel? "
                             f"pass group= the data-parallel group")
        found = verdict(step, self.group_ranks, self.names, rows[:, 1:].tolist())
        if found is None:
            return
        _, culprit, differ = found
        found = verdict(step, self.group_ranks, self.names, rows[:, 1:].tolist(),
                        self._how_far(culprit, differ, rows[:, 1:].tolist()))
        # Every rank raises: none may exit (closing its connections) while
        # another still waits for its part of the gathers above.
        self.dist.barrier(group=self.group)
        raise ReplicaDivergence(found[0], step, culprit, [self.names[i] for i in found[2]])

    def _how_far(self, culprit, differ, rows):
        """For the first differing tensors: the values of every replica
        gathered (every rank takes part), the wrong one's against a right one's."""
        ranks = self.group_ranks
        if culprit is None:  # no majority: the lowest rank against the first that differs from it
            culprit = ranks[0]
        other = next(r for r, row in zip(ranks, rows) if row != rows[ranks.index(culprit)])
        out = {}
        for i in differ[:DETAIL_TENSORS]:
            p = _local(self.params[i][1]).detach()
            if p.numel() * p.element_size() > DETAIL_MAX_BYTES:
                out[i] = "values not gathered: over 256 MiB"
                continue
            # As bytes: gloo gathers no bf16, bool or int16.
            mine = p.contiguous().reshape(-1).view(torch.uint8).to(self._device())
            values = [torch.empty_like(mine) for _ in ranks]
            self.dist.all_gather(values, mine, group=self.group)
            a, b = (values[ranks.index(r)].cpu().view(p.dtype) for r in (culprit, other))
            out[i] = describe_difference(a, b)
        return out


def _as_ints(t):
    """The elements' bit patterns as an integer tensor of the same size."""
    size = t.element_size()
    if not t.is_floating_point() and t.dtype != torch.bool:
        return t
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]) \
        if t.dtype != torch.bool else t.to(torch.uint8)


def describe_difference(a, b):
    """'1 bit in 1 of 4096 elements, largest |difference| 2.50e-01'."""
    ia, ib = _as_ints(a.reshape(-1)), _as_ints(b.reshape(-1))
    elements = int((ia != ib).sum())
    x = (ia ^ ib).to(torch.int64)
    bits = sum(int(((x >> k) & 1).sum()) for k in range(a.element_size() * 8))
    diff = (a.double() - b.double()).abs()
    largest = float(diff.max()) if diff.numel() else 0.0
    plural = "s" if bits != 1 else ""
    return f"{bits} bit{plural} in {elements} of {a.numel()} elements, largest |difference| {largest:.2e}"
