#include "numerics/detector/loose_report.h"

#include <filesystem>

#include "numerics/detector/format.h"

namespace gpudiag::numerics {

std::vector<LooseTensor> loose_tensors(const InputFile& in) {
  std::vector<LooseTensor> out;
  if (in.kind == InputKind::npy) {
    out.push_back({std::filesystem::path(in.path()).stem().string(), &in.npy.tensor});
    return out;
  }
  for (const auto& t : in.safetensors.tensors) out.push_back({t.name, &t});
  return out;
}

void print_loose_header(std::ostream& out) { out << kColumnHeader << '\n'; }

bool print_loose_file(std::ostream& out, const std::string& path,
                      std::span<const LooseTensor> tensors, std::span<const TensorStats> stats) {
  out << kPrefix << ' ' << path << '\n';
  bool found = false;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorStats& s = stats[i];
    out << stats_line(s, tensors[i].label) << '\n';
    if (s.has_nan()) out << tensors[i].label << " has nans\n";
    if (s.has_inf()) out << tensors[i].label << " has infs\n";
    found = found || s.has_nan() || s.has_inf();
  }
  return found;
}

}  // namespace gpudiag::numerics
