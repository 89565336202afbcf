// ProgressWatch (progress_watch.h): progress files read whole (256 bytes at
// most), native stacks taken at half the limit, at the limit and at each look
// after hold_off().
#include "launch/progress_watch.h"

#include <fstream>

#include "launch/stacks.h"

namespace gpudiag::launch {

namespace {

/// "SEQ HASH\n" as the startup hook writes it: SEQ, -1 or more, else nullopt
/// (the file is the rank's: read as a stranger's bytes).
std::optional<long long> parse_sequence(const std::string& text) {
  std::size_t i = text[0] == '-' ? 1 : 0;
  const std::size_t digits = text.find_first_not_of("0123456789", i);
  const std::size_t end = digits == std::string::npos ? text.size() : digits;
  if (end == i || end - i > 18 || (end < text.size() && text[end] != ' ' && text[end] != '\n'))
    return std::nullopt;
  const long long v = std::stoll(text.substr(0, end));
  return v < -1 ? std::nullopt : std::optional<long long>(v);
}

}  // namespace

void ProgressWatch::progress() {
  last_ = Clock::now();
  native_half_.clear();
  half_taken_ = false;
  next_check_.reset();
}

void ProgressWatch::hold_off(double seconds) {
  next_check_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(seconds));
}

std::optional<long long> ProgressWatch::sequence(pid_t pid) const {
  const auto it = seq_.find(pid);
  return it == seq_.end() ? std::nullopt : it->second;
}

double ProgressWatch::idle_s() const {
  return std::chrono::duration<double>(Clock::now() - last_).count();
}

std::map<pid_t, std::string> ProgressWatch::native_summaries(const std::vector<Rank>& live) const {
  std::map<pid_t, std::string> out;
  for (const auto& r : live) {
    if (!r.progress_file.empty()) continue;
    RankStack s = take_stack(r.pid, "");
    summarise(s);
    out[r.pid] = s.where;
  }
  return out;
}

bool ProgressWatch::hung(const std::vector<Rank>& live) {
  bool native = false;
  for (const auto& r : live) {
    if (r.progress_file.empty()) {
      native = true;
      continue;
    }
    std::ifstream f(r.progress_file);
    char buf[256];
    f.read(buf, sizeof buf);
    const std::string now(buf, static_cast<std::size_t>(f.gcount()));
    if (!now.empty()) seq_[r.pid] = parse_sequence(now);
    auto& before = seen_[r.progress_file];
    if (!now.empty() && now != before) {
      before = now;
      progress();
    }
  }
  const double idle = idle_s();
  if (native && !half_taken_ && idle >= limit_s_ / 2) {
    native_half_ = native_summaries(live);
    half_taken_ = true;
  }
  if (idle < limit_s_) return false;
  if (next_check_ && Clock::now() < *next_check_) return false;
  if (native && half_taken_) {
    // A native rank that moved since half the limit (or the last look) is
    // progress; one whose stack cannot be read ("no stack ...") is judged by
    // the others.
    auto now = native_summaries(live);
    for (const auto& [pid, where] : now) {
      auto it = native_half_.find(pid);
      if (it != native_half_.end() && it->second != where && where.rfind("no stack", 0) != 0) {
        progress();
        return false;
      }
    }
    native_half_ = std::move(now);
  }
  return true;
}

}  // namespace gpudiag::launch
