#include "numerics/formats/quote.h"

#include "util/text.h"

namespace gpudiag::numerics {

std::string quote(std::string_view s, std::size_t max_len) {
  const bool cut = s.size() > max_len;
  std::string out = "\"";
  for (char c : escape_text(cut ? s.substr(0, max_len) : s)) {  // util/text.h
    if (c == '"') out += '\\';
    out += c;
  }
  return out + (cut ? "...\"" : "\"");
}

}  // namespace gpudiag::numerics
