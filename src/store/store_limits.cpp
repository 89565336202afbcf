#include "store/store_limits.h"

#include <charconv>

namespace gpudiag::storelimits {

std::optional<long long> parse_bounded(std::string_view text, long long min, long long max) {
  // from_chars takes no '+' and no spaces, and reports overflow: just what a
  // counter written by ADD looks like.
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (v < min || v > max) return std::nullopt;
  return v;
}

std::string store_text(std::string_view text, std::size_t max) {
  std::string out;
  const bool cut = text.size() > max;
  if (cut) text = text.substr(0, max);
  out.reserve(text.size() + 3);
  for (unsigned char c : text) out += (c < 32 || c == 127) ? '?' : static_cast<char>(c);
  if (cut) out += "...";
  return out;
}

}  // namespace gpudiag::storelimits
