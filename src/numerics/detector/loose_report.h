// The report for plain safetensors and .npy files (no frames): the
// equivalent of calling the reference's detect_overflow(tensor, name) on each
// tensor, plus its abs min/max line. Per file, a header line with the path
// (in the frame-header style), then per tensor, in file order:
//   f"{abs_min:8.2e} {abs_max:8.2e} {name}"
//   "<name> has nans"     when it has NaN
//   "<name> has infs"     when it has an inf
// A .npy file holds one tensor, named after the file without ".npy".
#pragma once

#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "numerics/formats/inputs.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics {

struct LooseTensor {
  std::string label;
  const TensorInfo* tensor = nullptr;
};

/// The tensors of one loose input file, in report order.
std::vector<LooseTensor> loose_tensors(const InputFile& in);

/// Prints the column header once, before the first file.
void print_loose_header(std::ostream& out);

/// Prints one file's lines; returns true when a tensor has nan or inf.
bool print_loose_file(std::ostream& out, const std::string& path,
                      std::span<const LooseTensor> tensors, std::span<const TensorStats> stats);

}  // namespace gpudiag::numerics
