#include "report/status_line.h"

#include "util/text.h"

namespace gpudiag {

std::string status_line(const RankRecord& r) {
  // Host and reason may hold a stranger's bytes (a host name, an environment
  // value in a message): escaped, so the line stays one line of plain text.
  std::string line = "[" + clean_text(r.host) + "-" + std::to_string(r.local_rank) + "] ";
  if (r.ok) {
    line += "is OK (global rank: " + std::to_string(r.rank) + "/" + std::to_string(r.world_size) +
            ")";
  } else {
    std::string reason = r.reason.empty() ? "failed in " + r.failed_phase : r.reason;
    for (auto& c : reason)  // a library's multi-line text reads best as one line
      if (c == '\n' || c == '\r') c = ' ';
    line += "is broken: " + clean_text(reason);
  }
  return line + "\n";
}

}  // namespace gpudiag
