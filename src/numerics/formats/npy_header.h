// The header dictionary of a .npy file: a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// parsed by a small hand-written recursive-descent parser (no library parses
// Python literals in C++, and evaluating them is exactly what must not happen).
// Only the three keys numpy writes are accepted; each appears once.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::numerics {

struct NpyHeader {
  std::string descr;  ///< e.g. "<f4", "|V2"
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

/// Why a header was rejected (the caller adds the file name).
struct NpyHeaderError : std::runtime_error {
  explicit NpyHeaderError(const std::string& what, std::string fix = {})
      : std::runtime_error(what), remedy(std::move(fix)) {}
  std::string remedy;  ///< what to try; empty: the generic "save it again"
};

/// At most this many dimensions (numpy allows 64 since 2.0, 32 before).
inline constexpr std::size_t kMaxNpyDims = 64;

/// Parses the dictionary; throws NpyHeaderError.
NpyHeader parse_npy_header(std::string_view text);

}  // namespace gpudiag::numerics
