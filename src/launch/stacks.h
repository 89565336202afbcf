// Where each rank of a hung job is, by its stack, and which ranks differ.
//
// take_stack(): a Python rank that runs the launcher's startup hook (a
// sitecustomize.py on its PYTHONPATH that registers faulthandler on SIGUSR2,
// writing to its GPUDIAG_STACK_FILE) is sent SIGUSR2 and its dump read back
// once it stops growing; any other rank's native stack is read with
// elfutils' eu-stack, else gdb (Debian packages elfutils, gdb). Both bounded:
// a few seconds and 256 KiB of text per rank.
//
// group_stacks(): each rank is summarised by its innermost frame that says
// where it is ("train.py:42 in main"); a rank that waits for another by the
// names of wait_frames.h (a collective, a barrier, a store wait, DDP's
// backward, a synchronisation behind a collective) is "waiting in" that call,
// from the first frame of its own code. Ranks are grouped by that summary; the ranks
// that are not waiting while others are, or else the smallest groups, are
// named first as the ones the job waits for.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace gpudiag::launch {

struct RankStack {
  int rank = 0;
  int local_rank = 0;
  std::string host;
  std::string source;               ///< "python", "eu-stack", "gdb", or "" (none taken)
  std::vector<std::string> frames;  ///< innermost first, as "file:line in func" or "func"
  std::string text;                 ///< the raw dump, for the file
  std::string error;                ///< why no stack was taken
  std::string where;                ///< the summary (group key)
  bool waiting = false;             ///< waits for another rank (wait_frames.h)
  pid_t pid = 0;
  /// A Python rank whose Python frames name no wait: its main thread's native
  /// frames, when the hang verdict took them (wait_frames.h); else empty.
  std::vector<std::string> native;
  /// Its default process group's sequence number from the startup hook's
  /// progress file: -1 no group, nullopt not known.
  std::optional<long long> sequence;
};

/// The stack of `pid`; `python_dump` is the rank's GPUDIAG_STACK_FILE ("" none).
RankStack take_stack(pid_t pid, const std::string& python_dump);

/// True when process `pid` has a handler installed for signal `sig` now
/// (SigCgt of /proc/PID/status under `proc_root`); false when unknown.
bool catches_signal(pid_t pid, int sig, const std::string& proc_root = "/proc");

/// Fills where/waiting from frames (exposed for tests).
void summarise(RankStack& s);

/// "rank 1 [node1-1] is in train.py:42 in main; ranks 0,2-7 wait in all_reduce
/// (distributed_c10d.py:1536) from train.py:40": at most 8 groups, one line each.
std::vector<std::string> group_stacks(const std::vector<RankStack>& stacks);

/// The ranks the others wait for, as group_stacks() names them (sorted;
/// empty when no rank waits or every group that does not is large).
std::vector<int> waited_for_ranks(const std::vector<RankStack>& stacks);

/// A frame of a library's (site-packages, the standard library, a frozen
/// module) rather than the user's own code.
bool library_frame(const std::string& frame);

/// A node's summaries for another launcher: one line per rank,
/// "rank\tlocal\twaiting\thost\twhere" (escaped, bounded).
std::string encode_stacks(const std::vector<RankStack>& stacks);
/// Reads them back; lines that do not parse are left out (a stranger's bytes).
std::vector<RankStack> decode_stacks(const std::string& text);

/// Parses a faulthandler dump: the main thread's frames (the one that runs
/// <module>), innermost first.
std::vector<std::string> python_frames(const std::string& dump);
/// Parses eu-stack's or gdb's output: the frames of thread `tid` (a frame
/// without a symbol is its address, "0x55c7b7c374af").
std::vector<std::string> native_frames(const std::string& text, pid_t tid);
/// Names each frame that is an address by the file mapped there and its
/// offset in that file ("sleep+0x44af"), from the text of /proc/PID/maps.
void name_addresses(std::vector<std::string>& frames, const std::string& maps);

}  // namespace gpudiag::launch
