#include "numerics/formats/npy_header.h"

#include <charconv>

#include "numerics/formats/quote.h"

namespace gpudiag::numerics {

namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        once(seen_descr, key);
        if (peek() == '[') fail("structured dtypes (record arrays) are not supported");
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        once(seen_order, key);
        h.fortran_order = boolean();
      } else if (key == "shape") {
        once(seen_shape, key);
        h.shape = tuple();
      } else {
        fail("header has the unexpected key " + quote(key));
      }
      skip_ws();
      if (peek() == ',')
        ++pos_;
      else if (peek() != '}')
        fail("expected ',' or '}' after the value of '" + key + "'");
    }
    ++pos_;  // '}'
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the header dictionary");
    if (!seen_descr || !seen_order || !seen_shape)
      fail("header lacks one of 'descr', 'fortran_order', 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) { throw NpyHeaderError(what); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c)
      fail(std::string("header dictionary: expected '") + c + "' at byte " + std::to_string(pos_));
    ++pos_;
  }
  void once(bool& seen, const std::string& key) {
    if (seen) fail("header has the key '" + key + "' twice");
    seen = true;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"')
      fail("header dictionary: expected a quoted string at byte " + std::to_string(pos_));
    const std::size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') fail("header dictionary: escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ == s_.size()) fail("header dictionary: unterminated string");
    return std::string(s_.substr(start, pos_++ - start));
  }
  bool boolean() {
    if (s_.substr(pos_, 4) == "True") return pos_ += 4, true;
    if (s_.substr(pos_, 5) == "False") return pos_ += 5, false;
    fail("'fortran_order' is neither True nor False");
  }
  std::uint64_t integer() {
    const char* begin = s_.data() + pos_;
    const char* end = s_.data() + s_.size();
    std::uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(begin, end, v);
    if (ptr == begin) fail("a shape entry is not a non-negative integer");
    if (ec == std::errc::result_out_of_range) fail("a shape entry does not fit in 64 bits");
    pos_ += static_cast<std::size_t>(ptr - begin);
    if (peek() == 'L') ++pos_;  // Python 2 long literal, as old numpy wrote them
    return v;
  }
  std::vector<std::uint64_t> tuple() {
    std::vector<std::uint64_t> out;
    expect('(');
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      if (out.size() == kMaxNpyDims)
        fail("shape has more than " + std::to_string(kMaxNpyDims) + " dimensions");
      out.push_back(integer());
      skip_ws();
      if (peek() == ',')
        ++pos_;
      else if (peek() != ')')
        fail("'shape' is not a tuple of integers");
    }
    ++pos_;  // ')'
    return out;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text) { return Parser(text).parse(); }

}  // namespace gpudiag::numerics
