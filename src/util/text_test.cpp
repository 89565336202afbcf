// The escaper: what it keeps, what it escapes, and that any bytes at all come
// out as valid one-line UTF-8 that a JSON writer takes.
#include "util/text.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

namespace gpudiag {
namespace {

TEST(EscapeText, KeepsTextAndEscapesWhatCouldHarm) {
  EXPECT_EQ(escape_text("node-17.cluster"), "node-17.cluster");
  EXPECT_EQ(escape_text("h\x1b[2J\nX"), "h\\x1b[2J\\x0aX");
  EXPECT_EQ(escape_text("caf\xc3\xa9"), "caf\xc3\xa9");             // é stays
  EXPECT_EQ(escape_text("a\xff" "b"), "a\\xffb");                    // not UTF-8
  EXPECT_EQ(escape_text("x\xe2\x80\xae" "y"), "x\\u202ey");         // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(escape_text("\xc2\x85"), "\\u0085");                     // a C1 control
  EXPECT_EQ(escape_text("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");  // a terminal title
  EXPECT_EQ(escape_text("a\\x41"), "a\\\\x41");                      // no forged escape
  EXPECT_EQ(escape_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");         // a surrogate
  EXPECT_EQ(escape_text("\xc0\xaf"), "\\xc0\\xaf");                  // overlong
  EXPECT_EQ(escape_text(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_TRUE(is_clean_text("ok a\\b caf\xc3\xa9"));
  EXPECT_FALSE(is_clean_text("\x7f"));
  EXPECT_FALSE(is_clean_text("\xe2\x80\xae"));
  // clean_text leaves clean text alone and escapes the rest once.
  EXPECT_EQ(clean_text("C:\\dir"), "C:\\dir");
  EXPECT_EQ(clean_text("h\x1b"), "h\\x1b");
  EXPECT_EQ(clean_text(clean_text("h\x1b")), "h\\x1b");
}

TEST(EscapeText, AnyBytesComeOutAsOneLineOfUtf8ThatJsonTakes) {
  std::mt19937 rng(9);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    const std::string e = escape_text(s);
    EXPECT_FALSE(first_invalid_utf8(e)) << i;
    EXPECT_EQ(e.find('\n'), std::string::npos);
    EXPECT_EQ(e.find('\x1b'), std::string::npos);
    EXPECT_NO_THROW((void)nlohmann::json(e).dump());
    EXPECT_TRUE(is_clean_text(e)) << i;
    EXPECT_EQ(clean_text(e), e);  // escaped once, never twice
  }
}

}  // namespace
TEST(JsonNesting, CountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(json_nesting(""), 0);
  EXPECT_EQ(json_nesting(R"({"a": [1, {"b": 2}]})"), 3);
  EXPECT_EQ(json_nesting(R"({"a": "[[[{{{", "b": "\"[["})"), 1);
  EXPECT_EQ(json_nesting(std::string(5000, '[')), 5000);
  EXPECT_EQ(json_nesting("[][][]"), 1);
}


TEST(LineWords, WordsAndBoundedIntegersFromALine) {
  std::string_view line = "  d 12  -3 99999999999999999999999 7x ";
  EXPECT_EQ(next_word(line), "d");
  std::int64_t v = 5;
  EXPECT_TRUE(word_int(next_word(line), 0, 100, v));
  EXPECT_EQ(v, 12);
  EXPECT_FALSE(word_int(next_word(line), 0, 100, v)) << "below the range";
  EXPECT_FALSE(word_int(next_word(line), 0, 1LL << 62, v)) << "too long to be a number";
  EXPECT_FALSE(word_int(next_word(line), 0, 100, v)) << "trailing bytes";
  EXPECT_EQ(v, 12) << "untouched when refused";
  EXPECT_EQ(next_word(line), "");
  EXPECT_EQ(next_word(line), "") << "still empty at the end";
}

}  // namespace gpudiag
