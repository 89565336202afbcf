// The expected-bandwidth table's files (data/expected-bw/*.json), compiled
// into the binary at build time by cmake/EmbedFiles.cmake: nothing is read
// at run time, and adding a GPU family is adding a file.
#pragma once

#include <cstddef>

namespace gpudiag {

struct EmbeddedFile {
  const char* name;  ///< "h100-sxm.json"
  const char* text;
};

/// Sorted by name; kExpectedBwFiles_count entries (none: one null entry).
extern const EmbeddedFile kExpectedBwFiles[];
extern const std::size_t kExpectedBwFiles_count;

}  // namespace gpudiag
