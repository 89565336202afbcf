#!/usr/bin/env python3
"""The Gloo anchor for gpudiag bench on the host: torch.distributed's
all_reduce, all_gather_into_tensor-like all_gather and all_to_all_single
(backend gloo, float32 on the CPU) timed the way gpudiag bench and
bench/mpi_collectives.c time theirs: per size, warm-up calls, a barrier,
the mean of the timed calls, and the slowest rank's mean. Sizes as
nccl-tests turns -b/-e bytes into counts (16-byte blocks per rank).
Prints "bytes seconds" per size on rank 0.

One process per rank, started by bench/host_collectives.py with torch's
env:// variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE):

    gloo_collectives.py OP MIN MAX ITERS WARMUP   OP: allreduce | allgather | alltoall

Gloo's all_reduce works in place (torch has no out-of-place form); the
others write a separate output, as MPI's and gpudiag's out-of-place calls."""
import sys
import time

import torch
import torch.distributed as dist


def main():
    op, lo, hi, iters, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
        int(sys.argv[5])
    dist.init_process_group("gloo", init_method="env://")
    n, rank = dist.get_world_size(), dist.get_rank()
    torch.set_num_threads(1)
    bytes_ = lo
    while bytes_ <= hi:
        count = bytes_ // 4
        per = (count // n) & ~3
        if op == "allreduce":
            buf = torch.ones(count, dtype=torch.float32)
            call = lambda: dist.all_reduce(buf)
            shown = count * 4
        elif op == "allgather":
            mine = torch.ones(per, dtype=torch.float32)
            out = [torch.empty(per, dtype=torch.float32) for _ in range(n)]
            call = lambda: dist.all_gather(out, mine)
            shown = per * n * 4
        else:
            send = torch.ones(per * n, dtype=torch.float32)
            recv = torch.empty(per * n, dtype=torch.float32)
            call = lambda: dist.all_to_all_single(recv, send)
            shown = per * n * 4
        for _ in range(warmup):
            call()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        slowest = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"{shown} {slowest.item():.9f}", flush=True)
        bytes_ *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
