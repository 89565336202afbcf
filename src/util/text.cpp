// The escaper (text.h): one pass, decoding UTF-8 sequence by sequence.
#include "util/text.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>

namespace gpudiag {

namespace {

/// Length of the valid UTF-8 sequence at p[i] (1-4), or 0 when it is not one;
/// `cp` gets its code point.
std::size_t sequence(const std::uint8_t* p, std::size_t i, std::size_t n, std::uint32_t& cp) {
  const std::uint8_t c = p[i];
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  std::size_t len;
  std::uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i + k] & 0x3F);
  }
  return len;
}

bool is_bidi_control(std::uint32_t cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string escape_text(std::string_view s) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  const std::size_t n = s.size();
  std::string out;
  out.reserve(n);
  char buf[12];
  for (std::size_t i = 0; i < n;) {
    std::uint32_t cp = 0;
    const std::size_t len = sequence(p, i, n, cp);
    if (len == 0 || cp < 0x20 || cp == 0x7F) {  // not UTF-8, or a C0 control or DEL
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(p[i]));
      out += buf;
      ++i;
    } else if ((cp >= 0x80 && cp <= 0x9F) || is_bidi_control(cp)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
      i += len;
    } else {
      if (cp == '\\') out += '\\';
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

bool is_clean_text(std::string_view s) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  std::uint32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = sequence(p, i, s.size(), cp);
    if (len == 0 || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || is_bidi_control(cp))
      return false;
    i += len;
  }
  return true;
}

std::string clean_text(std::string_view s) {
  return is_clean_text(s) ? std::string(s) : escape_text(s);
}

std::optional<std::size_t> first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  std::uint32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = sequence(p, i, s.size(), cp);
    if (len == 0) return i;
    i += len;
  }
  return std::nullopt;
}

int json_nesting(std::string_view s) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string_view next_word(std::string_view& line) {
  const auto start = line.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(start);
  const auto end = std::min(line.find(' '), line.size());
  const auto word = line.substr(0, end);
  line.remove_prefix(end);
  return word;
}

bool word_int(std::string_view word, long long lo, long long hi, std::int64_t& out) {
  if (word.empty() || word.size() > 20) return false;
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
  if (ec != std::errc() || p != word.data() + word.size() || v < lo || v > hi) return false;
  out = v;
  return true;
}

}  // namespace gpudiag
