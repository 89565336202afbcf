// One line of an NCCL_DEBUG log: its grammar across NCCL versions.
//
// NCCL writes (NCCL 2.4 and later; see its src/debug.cc):
//
//   [TIMESTAMP] HOST:PID:TID [DEV] NCCL INFO MESSAGE
//   [TIMESTAMP] HOST:PID:TID [DEV] FILE:LINE [(FUNC)] NCCL WARN MESSAGE
//   HOST:PID:TID [DEV] ELAPSED FUNC:LINE NCCL TRACE MESSAGE
//   HOST:PID:TID NCCL CALL MESSAGE
//   NCCL version 2.19.3+cuda12.3                      (NCCL_DEBUG=VERSION, or rank 0 of old NCCL)
//
// The timestamp is optional (recent NCCL stamps WARN lines by default, any level when
// NCCL_DEBUG_TIMESTAMP_LEVELS says so, in the strftime format of NCCL_DEBUG_TIMESTAMP_FORMAT).
// NCCL 2.0-2.3 wrote "HOST:PID:TID [DEV] INFO ..." and "... FILE:LINE WARN ..." without the
// "NCCL" word. Launchers and people add prefixes in front: "[1,3]<stdout>:" (Open MPI
// --tag-output), "[default3]:" / "[rank3]:" (torchrun --tee), "3: " (srun --label),
// "(pid=123) " (Ray), "10.0.0.1: " (pdsh), pasted quote marks. People also strip the host part.
//
// The parser looks for the level word ("NCCL INFO", "NCCL WARN", ...), then reads the
// tokens to its left from right to left (FUNC, FILE:LINE, [DEV], HOST:PID:TID); whatever is
// left over is a prefix, from which it takes a launcher rank and a timestamp when it finds
// one. Anything it cannot read that way is not an NCCL line (nullopt), never an error.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpudiag::nccl_log {

enum class Level { info, warn, trace, call, version };

/// "INFO", "WARN", "TRACE", "CALL", "VERSION".
const char* level_name(Level level);

/// One parsed NCCL line. Fields NCCL did not write (or a person removed) stay empty / -1.
struct Line {
  Level level = Level::info;
  std::string host;        ///< "node1"; empty when the line has no host part
  long pid = -1;           ///< process id, -1 when absent
  long tid = -1;           ///< thread id, -1 when absent
  int device = -1;         ///< the CUDA device NCCL's thread had current, "[3]" -> 3
  std::string timestamp;   ///< "2024-05-01 10:00:00" (text inside [...] or an ISO token)
  std::string source;      ///< WARN: "misc/socket.cc:483"; TRACE: "func:line"
  std::string function;    ///< WARN of newer NCCL: "(ncclMemAlloc)" -> "ncclMemAlloc"
  std::string message;     ///< text after the level word, trailing blanks removed
  std::string launcher;    ///< launcher prefix as written ("[1,3]<stdout>:"), or empty
  int launcher_rank = -1;  ///< rank the launcher prefix names, -1 when none
  bool legacy = false;     ///< NCCL <= 2.3 form without the word "NCCL"
};

/// Parses one line (without its newline). nullopt when the line is not an NCCL log line.
std::optional<Line> parse_line(std::string_view raw);

/// Strips stacked launcher prefixes ("[1,3]<stdout>:", "[rank3]:", "  3: ") from the front of
/// `s`, as parse_line does; records them in out.launcher and out.launcher_rank.
std::string_view strip_launcher_prefixes(std::string_view s, Line& out);

/// One step of an error chain: NCCL logs "FILE:LINE -> CODE [THREAD]" at INFO level for each
/// function an error code returns through ("misc/socket.cc:564 -> 2", "group.cc:65 -> 2
/// [Async thread]").
struct ChainStep {
  std::string where;   ///< "misc/socket.cc:564"
  int code = 0;        ///< ncclResult_t value
  std::string thread;  ///< "Async thread", "Proxy Thread", or empty
};

/// Parses an INFO message as a chain step; nullopt when it is not one.
std::optional<ChainStep> parse_chain_step(std::string_view message);

/// ncclResult_t name for a code: 2 -> "ncclSystemError"; "ncclResult 9" for unknown codes.
std::string result_name(int code);
/// What a code means for a user, in a few words: 6 -> "a remote peer failed or the network broke".
std::string result_meaning(int code);

}  // namespace gpudiag::nccl_log
