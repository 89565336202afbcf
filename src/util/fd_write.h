// Writing a whole buffer to a file descriptor: the status lines, the launcher's
// reports and the files gpudiag writes all go through it, so a line shared with
// other ranks' output is one write(2) where the kernel allows it.
#pragma once

#include <string>

namespace gpudiag {

/// Writes `text` to `fd` with as few write(2) calls as the kernel allows
/// (one for anything up to PIPE_BUF), retrying on EINTR and short writes.
/// False, with errno saying why, when not all of it could be written
/// (callers writing to the terminal may ignore it: nothing is left to do).
bool write_all(int fd, const std::string& text);

}  // namespace gpudiag
