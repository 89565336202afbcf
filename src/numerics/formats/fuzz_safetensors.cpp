// libFuzzer target: any bytes through the safetensors reader. A malformed
// file must end in UsageError; whatever parses is scanned and its names are
// read as frame entries, so the scanner and the name parser are fuzzed too.
#include <cstddef>
#include <cstdint>

#include "numerics/detector/frames.h"
#include "numerics/formats/safetensors.h"
#include "numerics/scan/scan_kernels.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpudiag::numerics;
  try {
    const SafetensorsFile f = parse_safetensors(Bytes(data, size), "fuzz.safetensors");
    for (const TensorInfo& t : f.tensors) {
      if (t.data.size() != t.count * dtype_size(t.dtype)) __builtin_trap();
      scan_range(view_of(t), 0, t.count);
      parse_entry_name(t.name);
    }
    for (const auto& [key, value] : f.metadata) parse_entry_name(key);
  } catch (const gpudiag::UsageError&) {
  }
  return 0;
}
