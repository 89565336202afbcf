// The status line each rank prints (contract, docs/formats.md):
//   [HOSTNAME-LOCALRANK] is OK (global rank: RANK/WORLD_SIZE)
//   [HOSTNAME-LOCALRANK] is broken: REASON
// written with a single write(2) so lines of different ranks sharing a pipe or
// terminal never interleave.
#pragma once

#include <string>

#include "checks/record.h"

namespace gpudiag {

/// The line, with its trailing newline; REASON is forced onto one line.
std::string status_line(const RankRecord& r);

/// Writes `text` to `fd` with as few write(2) calls as the kernel allows
/// (one for anything up to PIPE_BUF), retrying on EINTR and short writes.
/// False, with errno saying why, when not all of it could be written
/// (callers writing to the terminal may ignore it: nothing is left to do).
bool write_all(int fd, const std::string& text);

}  // namespace gpudiag
