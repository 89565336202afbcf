#include "numerics/detector/format.h"

#include <charconv>
#include <cmath>

namespace gpudiag::numerics {

namespace {

std::string right_align(std::string_view s, std::size_t width) {
  std::string out;
  if (s.size() < width) out.assign(width - s.size(), ' ');
  out += s;
  return out;
}

}  // namespace

std::string format_e2(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // std::to_chars with a precision rounds the exact binary value correctly,
  // like Python's float formatting, independent of the C locale.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific, 2);
  return std::string(buf, static_cast<std::size_t>(end - buf));
}

std::string format_e82(double x) { return right_align(format_e2(x), 8); }

std::string stats_line(const TensorStats& s, std::string_view label) {
  if (s.empty()) return placeholder_line("empty", label);
  std::string out = format_e82(s.abs_min);
  out += ' ';
  out += format_e82(s.abs_max);
  out += ' ';
  out += label;
  return out;
}

std::string placeholder_line(std::string_view what, std::string_view label) {
  std::string out = right_align(what, 17);
  out += ' ';
  out += label;
  return out;
}

}  // namespace gpudiag::numerics
