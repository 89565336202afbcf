// Cuts a child's output stream into whole lines and prefixes each one.
//
// Children write into pipes in whatever chunks they like; the launcher must
// never print half a line from one rank and then a line from another. A
// LineSplitter keeps the unterminated tail of each stream until its newline
// arrives, emits only complete lines (prefixed, e.g. "[rank3]: "), and at the
// end of the stream emits the tail with a newline added. A line longer than
// `max_line` bytes is emitted in pieces of that size, so one rank that never
// prints a newline cannot make the launcher hold unbounded memory. A line
// that starts with kJsonLineStart (a gpudiag `--json -` document on one line)
// is emitted without the prefix, so the ranks' documents form one JSON Lines
// stream (docs/json.md); one longer than `max_line` is cut like any other.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpudiag::launch {

/// How every compact gpudiag JSON document begins (docs/json.md).
inline constexpr std::string_view kJsonLineStart = "{\"schema\":\"gpudiag-";

class LineSplitter {
 public:
  static constexpr std::size_t kDefaultMaxLine = 1 << 20;

  explicit LineSplitter(std::string prefix, std::size_t max_line = kDefaultMaxLine);

  /// Appends to `out` every line that `bytes` completes, each as
  /// prefix + line + '\n'; keeps the unterminated rest for the next call.
  void feed(std::string_view bytes, std::string& out);
  /// Appends the unterminated rest, if any, as a line (with '\n' added).
  void finish(std::string& out);
  /// Bytes waiting for their newline.
  std::size_t pending() const { return partial_.size(); }

 private:
  void emit(std::string_view line, std::string& out) const;

  std::string prefix_;
  std::size_t max_line_;
  std::string partial_;
};

/// "[rank3]: ", the prefix torchrun's --tee uses for a rank's lines.
std::string rank_prefix(int rank);

}  // namespace gpudiag::launch
