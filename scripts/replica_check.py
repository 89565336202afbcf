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
   The first differing tensors are then located (only then) by checksums of
   their chunks, gathered like the sums, narrowed to one chunk of at most
   1 MiB, whose bytes alone the wrong replica and a right one broadcast: at
   most two such chunks are held at once, whatever the tensor's size. The
   message says bits that differ and the largest |difference| there.

Expert (MoE) parameters, which Megatron-LM and DeepSpeed mark with
`allreduce = False`, are replicated over the expert-data-parallel group
only: they are left out of the check over `group` (given or not), and
checked over `expert_group=` when it is given, in a file of their own
(`rank00003.experts.replica.jsonl`), or with the others when the two groups
hold the same ranks.

`before_check`, a callable, runs at the start of every checked step: an
optimizer that gathers its parameters later (Megatron's distributed
optimizer with overlap_param_gather, ZeRO's deferred all-gather) leaves the
replicas different after optimizer.step() until that gather; before_check
finishes it (e.g. the optimizer's own "finish param sync" call), or call
.step() after the next forward, once the gather is done.

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
import warnings
from collections import Counter

import torch

FORMAT = "gpudiag-replica-sums/2"  # /2: the checksum multiplier 2a + 1 (docs/formats.md)
DETAIL_TENSORS = 3  # tensors whose differences are located to say how far apart they are
CHUNK_BYTES = 1 << 20  # a differing tensor is narrowed to a chunk this large before its bytes move
CHUNKS_PER_ROUND = 1024  # checksums per rank per narrowing round (8 KiB each)
MESSAGE_BYTES = 4096  # an expert group's divergence, passed to the ranks of other groups


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


def _expert(p):
    """Whether `p` is an expert (MoE) parameter, replicated over the
    expert-data-parallel group only: Megatron-LM and DeepSpeed mark those
    with allreduce = False."""
    return getattr(p, "allreduce", True) is False


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
    before_check: called with no arguments before each checked step's
        checksums: finishes a parameter gather the optimizer deferred.
    expert_group: the expert-data-parallel group, over which the expert
        parameters (allreduce = False) are checked; without it they are not.
    """

    def __init__(self, model, out_dir, every=1, group=None, lib=None, before_check=None, expert_group=None,
                 _kind=""):
        import gpudiag_scan  # beside this file
        self.lib = gpudiag_scan.load(lib)
        self.every = max(1, int(every))
        if before_check is not None and not callable(before_check):
            raise TypeError("ReplicaCheck: before_check must be callable (or None)")
        self.before_check = before_check
        inner = getattr(model, "module", model)
        ignored = set(getattr(model, "parameters_to_ignore", None) or ())
        everything = [(n, p) for n, p in inner.named_parameters() if n not in ignored]
        self.dist, self.rank = _world_and_rank()
        self.experts = None
        # Without a process group every parameter is this process's own.
        self.params = [(n, p) for n, p in everything
                       if self.dist is None or _expert(p) == (_kind == "experts")]
        fsdp = any(type(m).__name__ == "FullyShardedDataParallel" for m in model.modules())
        if group is None and _kind != "experts":
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
        experts = [(n, p) for n, p in everything if self.dist is not None and _expert(p)]
        if experts and _kind != "experts":
            if expert_group is None:
                warnings.warn(f"ReplicaCheck: {len(experts)} expert parameters (allreduce=False, e.g. "
                              f"{experts[0][0]}) are not checked: pass expert_group= the expert-data-"
                              f"parallel group")
            elif self._ranks_of(expert_group) == self.group_ranks:
                self.params += experts  # replicated over this very group
            else:
                self.experts = ReplicaCheck(model, out_dir, every, expert_group, lib, _kind="experts")
        self.names = [n for n, _ in self.params]
        layout = [(n, str(p.dtype), list(p.shape)) for n, p in self.params]
        self.digest = int.from_bytes(hashlib.blake2b(json.dumps(layout).encode(), digest_size=7).digest(),
                                     "little")
        os.makedirs(out_dir, exist_ok=True)
        kind = _kind + "." if _kind else ""
        name = "replica.jsonl" if self.rank is None else f"rank{self.rank:05d}.{kind}replica.jsonl"
        self.path = os.path.join(os.fspath(out_dir), name)
        header = {"format": FORMAT, "rank": self.rank, "group": self.group_ranks, "every": self.every,
                  "tensors": [{"name": n, "dtype": str(p.dtype).replace("torch.", ""), "shape": list(p.shape)}
                              for n, p in self.params]}
        self.file = open(self.path, "a")
        self.file.write(json.dumps(header, separators=(",", ":")) + "\n")
        self.file.flush()

    def close(self):
        self.file.close()
        if self.experts is not None:
            self.experts.close()

    def _ranks_of(self, group):
        """The global ranks of `group`, gathered over it."""
        mine, self.group = self.group, group
        try:
            return self._gather_ints([self.rank])[:, 0].tolist()
        finally:
            self.group = mine

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
        if self.before_check is not None:
            self.before_check()
        self._check(step)
        if self.experts is not None:
            self._experts_check(step)

    def _experts_check(self, step):
        """The expert check, whose divergence one expert group alone sees,
        raised on every rank of this group with the same message (the
        lowest rank's that saw one): none may go on to a collective the
        others have left."""
        seen = None
        try:
            self.experts._check(step)
        except ReplicaDivergence as e:
            seen = e
        text = (str(seen).encode()[:MESSAGE_BYTES] if seen else b"")
        mine = torch.zeros(MESSAGE_BYTES + 8, dtype=torch.uint8)
        mine[:8] = torch.tensor([len(text), -1 if seen is None or seen.rank is None else seen.rank],
                                dtype=torch.int32).view(torch.uint8)
        mine[8:8 + len(text)] = torch.tensor(list(text), dtype=torch.uint8)
        mine = mine.to(self._device())
        rows = [torch.empty_like(mine) for _ in range(self.dist.get_world_size(self.group))]
        self.dist.all_gather(rows, mine, group=self.group)
        for row in rows:
            n, culprit = row[:8].cpu().view(torch.int32).tolist()
            if n:
                message = bytes(row[8:8 + n].cpu().tolist()).decode(errors="replace")
                tensors = seen.tensors if seen else []
                raise ReplicaDivergence(message, step, None if culprit < 0 else culprit, tensors)

    def _check(self, step):
        sums = self.lib.checksums([_local(p) for _, p in self.params])
        self.file.write('{"step":%d,"sums":[%s]}\n' % (step, ",".join('"%016x"' % s for s in sums)))
        self.file.flush()
        if self.dist is None:
            return
        signed = [s - (1 << 64) if s >= 1 << 63 else s for s in sums]
        # The lists are compared before their sums are gathered: ranks with
        # different numbers of parameters would gather rows of different
        # lengths, which the backend aborts on (gloo: SIGABRT) or hangs.
        head = self._gather_ints([self.digest, len(signed)])
        if bool((head != head[0]).any()):
            raise ValueError(f"ReplicaCheck: {ranks_text(self.group_ranks)} hold different parameter "
                             f"lists (names, dtypes, shapes): is the model pipeline or tensor parallel? "
                             f"pass group= the data-parallel group")
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
        """For the first differing tensors: where the wrong replica's bytes
        differ from a right one's, located by chunk checksums (every rank
        takes part), and how far apart they are in that chunk."""
        ranks = self.group_ranks
        if culprit is None:  # no majority: the lowest rank against the first that differs from it
            culprit = ranks[0]
        other = next(r for r, row in zip(ranks, rows) if row != rows[ranks.index(culprit)])
        return {i: self._locate(_local(self.params[i][1]).detach(), culprit, other)
                for i in differ[:DETAIL_TENSORS]}

    def _locate(self, p, culprit, other):
        """Narrows [lo, hi) of p's bytes to one differing chunk of at most
        CHUNK_BYTES: each round checksums at most CHUNKS_PER_ROUND chunks and
        all-gathers their sums; then the wrong and the right replica
        broadcast that chunk alone. Every rank runs the same rounds (the
        tensors' shapes are the same on all: the layout digest said so)."""
        data = p.contiguous().reshape(-1).view(torch.uint8) if p.dtype != torch.bool \
            else p.contiguous().reshape(-1).to(torch.uint8)
        lo, hi, spread = 0, data.numel(), ""
        a_at, b_at = self.group_ranks.index(culprit), self.group_ranks.index(other)
        while hi - lo > CHUNK_BYTES:
            size = max(CHUNK_BYTES // 2, -(-(hi - lo) // CHUNKS_PER_ROUND))
            size = -(-size // 8) * 8  # whole elements of any dtype
            starts = range(lo, hi, size)
            sums = self.lib.checksums([data[s:min(s + size, hi)] for s in starts])
            signed = [x - (1 << 64) if x >= 1 << 63 else x for x in sums]
            got = self._gather_ints(signed).tolist()
            bad = [k for k in range(len(starts)) if got[a_at][k] != got[b_at][k]]
            if not bad:  # changed since the step's sums: say so rather than guess
                return "values not located: the replicas agree now"
            if not spread:
                spread = f"{len(bad)} of {len(starts)} chunks of {_size_text(size)} differ, the first "
            lo, hi = starts[bad[0]], min(starts[bad[0]] + size, hi)
        chunk = data[lo:hi].to(self._device())
        a, b = (self._from(r, chunk) for r in (culprit, other))
        a, b = (t.cpu().view(p.dtype) if p.dtype != torch.bool else t.cpu().to(torch.bool) for t in (a, b))
        where = ""
        if lo > 0 or hi < data.numel():
            e = p.element_size()
            where = f"; {spread}at elements {lo // e}-{hi // e - 1}"
        return describe_difference(a, b) + where

    def _from(self, rank, chunk):
        """`rank`'s copy of `chunk`, broadcast over the group."""
        mine = chunk.clone() if rank == self.rank else torch.empty_like(chunk)
        self.dist.broadcast(mine, src=rank, group=self.group)
        return mine


def _size_text(n):
    return f"{n >> 20} MiB" if n % (1 << 20) == 0 else f"{n >> 10} KiB" if n % 1024 == 0 else f"{n} bytes"


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
