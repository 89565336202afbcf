// The Xid action table (data/xid-actions.json), compiled into the binary by
// cmake/EmbedFiles.cmake (src/hw/CMakeLists.txt): nothing is read at run time.
#pragma once

#include "report/expected_bw_data.h"  // EmbeddedFile

namespace gpudiag {

extern const EmbeddedFile kXidActionFiles[];
extern const std::size_t kXidActionFiles_count;

}  // namespace gpudiag
