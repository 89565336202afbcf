// Whether any rank of this node has NCCL in it, from the libraries its process
// maps (/proc/PID/maps): NCCL's RAS listens only inside a process that runs
// NCCL, so a gloo or MPI job's launcher need not ask it and say that nothing
// listens there after every failure. NCCL counts when a rank maps libnccl
// (loaded by torch, by gpudiag itself, by any program) or torch's CUDA library
// (libtorch_cuda, into which some torch builds link NCCL statically).
#pragma once

#include <sys/types.h>

#include <string_view>
#include <vector>

namespace gpudiag::launch {

/// True when the text of a /proc/PID/maps file maps libnccl* or libtorch_cuda*.
bool maps_show_nccl(std::string_view maps);

/// True when any of `pids` maps NCCL, or when a live process's maps cannot be
/// read (then it is not known, and RAS is asked as before). A process already
/// gone, or ended and not yet reaped (its maps are empty), says nothing. At
/// most 8 MiB of each maps file is read.
bool any_rank_maps_nccl(const std::vector<pid_t>& pids);

}  // namespace gpudiag::launch
