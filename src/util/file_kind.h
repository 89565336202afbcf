// What a path is when it is not the regular file a reader expects: the
// wording of "X: is a FIFO (named pipe), not a regular file" errors, shared
// by scan's and nccl-log's readers.
#pragma once

#include <string>

namespace gpudiag {

/// "a FIFO (named pipe)", "a character device", ... for a st_mode; "a
/// regular file" for one that is.
std::string file_kind(unsigned mode);

}  // namespace gpudiag
