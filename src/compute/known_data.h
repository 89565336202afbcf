// The known checksums' table (data/compute-checksums.json), compiled into the
// binary by cmake/EmbedFiles.cmake (src/compute/CMakeLists.txt): nothing is
// read at run time; an operator's new entry takes a rebuild.
#pragma once

#include "report/expected_bw_data.h"  // EmbeddedFile

namespace gpudiag {

extern const EmbeddedFile kKnownChecksumFiles[];
extern const std::size_t kKnownChecksumFiles_count;

}  // namespace gpudiag
