// ProgressWatch (progress_watch.h): progress files read whole (256 bytes at
// most), native stacks taken twice per silent stretch at most.
#include "launch/progress_watch.h"

#include <fstream>

#include "launch/stacks.h"

namespace gpudiag::launch {

void ProgressWatch::progress() {
  last_ = Clock::now();
  native_half_.clear();
  half_taken_ = false;
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
  if (native && half_taken_) {
    // A native rank that moved since half the limit is progress; one whose
    // stack cannot be read ("no stack ...") is judged by the others.
    for (const auto& [pid, where] : native_summaries(live)) {
      auto it = native_half_.find(pid);
      if (it != native_half_.end() && it->second != where && where.rfind("no stack", 0) != 0) {
        progress();
        return false;
      }
    }
  }
  return true;
}

}  // namespace gpudiag::launch
