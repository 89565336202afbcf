// What a rank sends the launcher under --stragglers, and how the launcher
// reads it without trusting it.
//
// A datagram is text: a header line `r LOCAL_RANK DROPPED`, then lines
//   c GROUP SEQ OP ARRIVAL_NS END_NS FORWARD_NS [RUNQ_NS]
//                                                 a collective (END 0: not known,
//                                                 FORWARD 0: no forward yet; RUNQ:
//                                                 the time the arriving thread waited
//                                                 for a CPU since its last arrival in
//                                                 the group, 0 or absent: not known)
//   d GROUP SEQ OP CREATED_NS KERNEL_NS           a collective as PyTorch's NCCL flight
//                                                 recorder timed it on the rank's GPU
//                                                 (SEQ: the recorder's collective_seq_id,
//                                                 CREATED: its time_created_ns, KERNEL: its
//                                                 duration_ms in ns; rank_hook_kernels.cpp)
//   g GROUP RANK,RANK,...                         a group's members (global ranks)
// all numbers decimal, times on the rank's monotonic clock (a `d` line's
// CREATED on its wall clock: only its own differences are used). Anyone who can
// reach the socket can send anything, so every field is bounded: the local
// rank below the node's count, groups below kMaxGroupId, members below the
// world size, sorted and unique, an op of at most 32 letters, digits and
// `_`, times positive and an end not before its arrival, at most
// kMaxLines lines of at most 256 bytes. A bad line is counted and skipped;
// a bad header drops the datagram.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::stragglers {

inline constexpr int kMaxGroupId = 4096;
inline constexpr std::size_t kMaxLines = 1024;
inline constexpr std::size_t kMaxDatagram = 64 * 1024;

struct Arrival {
  int group = 0;
  std::int64_t seq = 0;
  std::string op;
  std::int64_t arrival_ns = 0;
  std::int64_t end_ns = 0;      ///< 0: not known (an asynchronous call)
  std::int64_t forward_ns = 0;  ///< the rank's last DDP forward start (0: none)
  /// Run-queue wait (schedstat's run_delay) of the arriving thread since its
  /// previous arrival in the group: runnable, not running (0: not known).
  std::int64_t runq_ns = 0;
  /// A `d` record: the collective's NCCL kernel time on the rank's GPU, from
  /// its start event to its end event (0: a `c` record, a host arrival).
  std::int64_t kernel_ns = 0;
};

struct GroupDecl {
  int group = 0;
  std::vector<int> ranks;  ///< global ranks, sorted, unique
};

struct Datagram {
  int local_rank = 0;
  std::int64_t dropped = 0;  ///< records the rank could not send so far
  std::vector<Arrival> arrivals;
  std::vector<GroupDecl> groups;
  int invalid = 0;  ///< lines skipped
};

/// The fields of a `c` line after the `c` (GROUP SEQ OP ARRIVAL END FORWARD [RUNQ]),
/// checked as above; false for a line that is not one.
bool read_collective(std::string_view line, Arrival& a);
/// The fields of a `d` line after the `d` (GROUP SEQ OP CREATED KERNEL): a
/// kernel of at most an hour, its creation time in arrival_ns.
bool read_kernel(std::string_view line, Arrival& a);
/// The fields of a `g` line after the `g` (GROUP RANKS), members below `world`.
bool read_group(std::string_view line, int world, GroupDecl& g);

/// The datagram's records, or nullopt when its header is not one of this
/// node's ranks'. `nproc`: ranks on this node; `world`: ranks in the job.
std::optional<Datagram> parse_datagram(std::string_view text, int nproc, int world);

}  // namespace gpudiag::stragglers
