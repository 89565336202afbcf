// The safetensors reader.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// UTF-8 JSON mapping tensor names to {dtype, shape, data_offsets} (plus an
// optional "__metadata__" map of strings), then the tensors' bytes. The
// reader checks what the format's own implementation checks, so a file either
// passes every check or is rejected with one line naming it and the problem:
//   - the header length fits in the file and is at most 100,000,000 bytes;
//   - the header is UTF-8, is one JSON object, has no duplicate keys;
//   - every dtype is known, every shape entry and offset a non-negative integer;
//   - the element count (product of the shape) and byte size do not overflow;
//   - sorted by offset, the tensors tile the data area exactly: each starts
//     where the previous ended (no gap, no overlap), each is exactly
//     count x dtype size bytes, and the last ends at the end of the file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "numerics/scan/tensor.h"

namespace gpudiag::numerics {

inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  ///< "__metadata__", empty when absent
  std::vector<TensorInfo> tensors;              ///< in file order (by data offset)
};

/// Parses and validates `file`; `name` (the path) starts every error message.
/// Throws UsageError ("NAME: problem") on any malformed input. The returned
/// tensors point into `file`.
SafetensorsFile parse_safetensors(Bytes file, const std::string& name);

}  // namespace gpudiag::numerics
