#include "numerics/quote.h"

#include <cstdio>

namespace gpudiag::numerics {

std::string quote(std::string_view s, std::size_t max_len) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (char ch : s) {
    if (shown++ == max_len) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
  return out;
}

}  // namespace gpudiag::numerics
