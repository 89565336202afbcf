// libFuzzer target: any bytes through the .npy reader, with and without a
// --dtype override. A malformed file must end in UsageError; an array that
// parses is scanned, big-endian and misaligned data included.
#include <cstddef>
#include <cstdint>

#include "numerics/formats/npy.h"
#include "numerics/scan/scan_kernels.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpudiag::numerics;
  const std::optional<DType> overrides[] = {std::nullopt, DType::BF16, DType::F8_E5M2};
  for (const auto& over : overrides) {
    try {
      const NpyArray a = parse_npy(Bytes(data, size), "fuzz.npy", over);
      const TensorInfo& t = a.tensor;
      if (t.data.size() != t.count * dtype_size(t.dtype)) __builtin_trap();
      scan_range(view_of(t), 0, t.count);
    } catch (const gpudiag::UsageError&) {
    }
  }
  return 0;
}
