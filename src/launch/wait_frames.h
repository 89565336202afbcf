// Whether a rank waits for another, by the names in its stack (docs/launch.md,
// "Which rank is the job waiting for"). --hang-timeout stops a job only when
// some rank does, so the names are those of waits on a peer, and nothing else:
//   - Python: the innermost frame is one of torch's waits on the other ranks:
//     a collective or a barrier of torch.distributed, a store wait (c10d
//     store get/wait inside torch: the store-based barrier, the rendezvous,
//     elastic's store helpers), a DDP broadcast; or autograd's backward or a
//     CUDA synchronisation, which wait on a peer (DDP's pending all-reduce, a
//     collective queued before them) only in a rank whose default process
//     group exists. An import, torch.load, a compile, a sleep or a CPU-bound
//     line is none of these, however long it takes.
//   - A Python rank whose innermost frame is its own code may still be inside
//     a native call of torch (store.wait(), work.wait(), .item() behind a
//     collective): its main thread's native frames answer that.
//   - Native (gpudiag's own ranks, --no-python): a frame of gloo, NCCL, MPI,
//     c10d or a ProcessGroup, a wait of gpudiag's own, or a CUDA
//     synchronisation; static initialisers (a library loading) are not waits.
// A rank whose default group's sequence number is ahead of a peer's on this
// node issued a collective that peer has not: it waits for that peer, wherever
// its code is (mark_ahead).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "launch/stacks.h"

namespace gpudiag::launch {

enum class WaitKind {
  none,      ///< not waiting for another rank
  peer,      ///< a collective, barrier, store wait or broadcast: waits for a peer
  in_group,  ///< backward or a CUDA synchronisation: a peer's wait when the rank has a group
};

struct FrameWait {
  WaitKind kind = WaitKind::none;
  std::string call;  ///< the waiting frame's function ("all_reduce", "c10d::TCPStore::wait")
};

/// A Python rank's frames (innermost first, "path:line in func"): its innermost
/// frame, judged by name.
FrameWait python_wait(const std::vector<std::string>& frames);

/// A native stack's frames (innermost first, function names): the innermost
/// frame of a wait on a peer, or of a CUDA synchronisation (in_group).
FrameWait native_wait(const std::vector<std::string>& frames);

/// The ranks of this node whose default group's sequence number (RankStack::
/// sequence) is ahead of another's are marked waiting, "ahead of rank(s) ...";
/// returns how many it marked that were not waiting already.
std::size_t mark_ahead(std::vector<RankStack>& stacks);

/// True when some rank waits for another.
bool some_rank_waits(const std::vector<RankStack>& stacks);

}  // namespace gpudiag::launch
