// What a reader hands the scanner: a tensor's name, dtype, shape and where its
// bytes are. Readers never copy element data; a TensorView points into the
// memory-mapped file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "numerics/scan/dtype.h"

namespace gpudiag::numerics {

using Bytes = std::span<const std::uint8_t>;

enum class ByteOrder : std::uint8_t { little, big };

/// A tensor as described by a file's header.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  ByteOrder order = ByteOrder::little;
  std::vector<std::uint64_t> shape;
  std::uint64_t count = 0;  ///< product of shape (1 for a scalar)
  Bytes data;               ///< exactly count * dtype_size(dtype) bytes
};

/// The elements the scanner reads: `count` elements of `dtype` at `data`
/// (any alignment), stored in `order`.
struct TensorView {
  DType dtype = DType::F32;
  ByteOrder order = ByteOrder::little;
  const std::uint8_t* data = nullptr;
  std::uint64_t count = 0;
};

inline TensorView view_of(const TensorInfo& t) {
  return {t.dtype, t.order, t.data.data(), t.count};
}

}  // namespace gpudiag::numerics
