// The .npy reader: format versions 1.0, 2.0 and 3.0, little- and big-endian
// numeric types, C or Fortran order (the scan is order-independent).
//
// Layout: "\x93NUMPY", major, minor, a header length (2 bytes in v1, 4 in
// v2/v3, little-endian), the header dictionary (latin-1 in v1/v2, UTF-8 in
// v3), then the array's bytes, which must be exactly shape x item size.
// Types numpy has no name for (bfloat16, fp8) are stored as raw void
// elements ('|V2', '|V1'); `dtype_override` says what they are. It also
// reinterprets integer arrays of the same item size (bf16 bits saved through
// a uint16 view). Object arrays, strings, complex numbers and structured
// dtypes are rejected.
#pragma once

#include <optional>
#include <string>

#include "numerics/scan/tensor.h"

namespace gpudiag::numerics {

/// Header dictionaries larger than this are rejected (numpy itself refuses
/// headers over 10,000 bytes unless told otherwise).
inline constexpr std::size_t kMaxNpyHeader = 1 << 20;

struct NpyArray {
  TensorInfo tensor;
  std::string descr;  ///< as stored, e.g. "<f4"
  bool fortran_order = false;
  bool override_applied = false;  ///< dtype_override was used for this file
};

/// True when `file` starts with the .npy magic string.
bool looks_like_npy(Bytes file);

/// Parses and validates `file`; `name` (the path) starts every error message.
/// Throws UsageError ("NAME: problem") on any malformed input.
NpyArray parse_npy(Bytes file, const std::string& name, std::optional<DType> dtype_override);

}  // namespace gpudiag::numerics
