#include "launch/line_splitter.h"

#include <algorithm>

namespace gpudiag::launch {

LineSplitter::LineSplitter(std::string prefix, std::size_t max_line)
    : prefix_(std::move(prefix)), max_line_(std::max<std::size_t>(max_line, 1)) {}

void LineSplitter::emit(std::string_view line, std::string& out) const {
  // A gpudiag JSON document on one line (cli/json_output.h) goes out bare, so
  // the ranks' `--json -` documents form one JSON Lines stream.
  if (!line.starts_with(kJsonLineStart)) out.append(prefix_);
  out.append(line);
  out.push_back('\n');
}

void LineSplitter::feed(std::string_view bytes, std::string& out) {
  while (!bytes.empty()) {
    auto newline = bytes.find('\n');
    auto take = newline == std::string_view::npos ? bytes.size() : newline;
    // Never let the pending piece grow past max_line_: cut it there.
    auto room = max_line_ - partial_.size();
    if (take > room) {
      partial_.append(bytes.substr(0, room));
      emit(partial_, out);
      partial_.clear();
      bytes.remove_prefix(room);
      continue;
    }
    if (newline == std::string_view::npos) {
      partial_.append(bytes);
      return;
    }
    if (partial_.empty()) {
      emit(bytes.substr(0, newline), out);
    } else {
      partial_.append(bytes.substr(0, newline));
      emit(partial_, out);
      partial_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void LineSplitter::finish(std::string& out) {
  if (partial_.empty()) return;
  emit(partial_, out);
  partial_.clear();
}

std::string rank_prefix(int rank) { return "[rank" + std::to_string(rank) + "]: "; }

}  // namespace gpudiag::launch
