// One rule for every string that comes from outside the process (host names,
// other ranks' records, environment values, file, module and tensor names):
// escaped where it is written, so it can neither break a line, drive the
// terminal, reorder what a reader sees, nor make a JSON writer throw.
//
// escape_text() keeps valid UTF-8 text as it is and writes, as visible
// escapes, every byte that is not part of valid UTF-8 (`\xff`), every control
// character (C0 and DEL as `\x1b`, C1 as `\u0085`), and every bidirectional
// formatting character (U+061C, U+200E-200F, U+202A-202E, U+2066-2069 as
// `\u202e`); a backslash is doubled, so an escape in the output is always
// one the escaper wrote. The result is valid UTF-8 and one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag {

std::string escape_text(std::string_view s);

/// True when `s` is valid UTF-8 without control or bidirectional formatting
/// characters: safe to write as it is. (Text escape_text wrote is clean.)
bool is_clean_text(std::string_view s);

/// `s` itself when clean, else escape_text(s): the function every writer and
/// every reader of a stranger's strings applies. Idempotent, so text escaped
/// once (a record re-read by rank 0) is not escaped again.
std::string clean_text(std::string_view s);

/// The offset of the first byte that is not part of well-formed UTF-8
/// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF);
/// nullopt when all of `s` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view s);

/// The deepest nesting of `[` and `{` outside JSON strings: a bound checked
/// before a parser's recursion meets text from outside.
int json_nesting(std::string_view s);

/// The next space-separated word of `line`, which is advanced past it; empty
/// at the end. For line formats from outside (records, shared lines).
std::string_view next_word(std::string_view& line);

/// `word` as a decimal integer in [lo, hi] into `out`; false (out untouched)
/// when it is not one, has trailing bytes or lies outside.
bool word_int(std::string_view word, long long lo, long long hi, std::int64_t& out);

}  // namespace gpudiag
