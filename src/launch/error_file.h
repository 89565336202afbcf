// A child's TORCHELASTIC_ERROR_FILE, as torch's @record writes it
// (torch/distributed/elastic/multiprocessing/errors/error_handler.py
// record_exception): {"message": {"message": "ValueError: bad step",
// "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1764100000"}}};
// a newer torch may write "message" as a plain string. The file is the
// child's, so it is read as a stranger's: at most kMaxErrorFile bytes, JSON
// that does not parse or has other shapes is "unreadable", and every string
// is escaped (util/text.h) and cut before it reaches the terminal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpudiag::launch {

inline constexpr std::size_t kMaxErrorFile = 1u << 20;

struct ChildError {
  std::string message;     ///< "ValueError: bad step" (escaped, at most 500 bytes)
  std::string where;       ///< the user's innermost "File ..., line N, in f" line, "" none:
                           ///< frames of frozen/stdlib modules, site-/dist-packages and
                           ///< gpudiag's scripts skipped (the last frame when all are)
  std::int64_t timestamp = 0;  ///< seconds since the epoch; 0 unknown
};

/// nullopt when `path` does not exist (the child wrote none); a ChildError
/// whose message says why when it exists but cannot be read as one.
std::optional<ChildError> read_child_error(const std::string& path);

/// A ReplicaCheck's ReplicaDivergence (scripts/replica_check.py), raised on
/// every rank with the same message: "replicas diverged at step 20: rank 2
/// differs from ranks 0-1,3 ...". `diverged` is whether `message` is one;
/// `rank` the rank it names as the wrong replica, -1 when no majority named one.
struct Divergence {
  bool diverged = false;
  int rank = -1;
};
Divergence replica_divergence(const std::string& message);

}  // namespace gpudiag::launch
