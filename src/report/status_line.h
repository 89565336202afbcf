// The status line each rank prints (contract, docs/formats.md):
//   [HOSTNAME-LOCALRANK] is OK (global rank: RANK/WORLD_SIZE)
//   [HOSTNAME-LOCALRANK] is broken: REASON
// written with a single write(2) so lines of different ranks sharing a pipe or
// terminal never interleave.
#pragma once

#include <string>

#include "checks/record.h"
#include "util/fd_write.h"  // write_all, which callers of status_line use

namespace gpudiag {

/// The line, with its trailing newline; REASON is forced onto one line.
std::string status_line(const RankRecord& r);


}  // namespace gpudiag
