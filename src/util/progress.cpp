// WaitNotice (progress.h).
#include "util/progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

namespace gpudiag {

WaitNotice::WaitNotice(std::function<std::string()> what, Deadline give_up,
                       std::chrono::milliseconds every)
    : what_(std::move(what)),
      give_up_(give_up),
      every_(every),
      start_(Deadline::Clock::now()),
      next_(start_ + every_),
      terminal_(::isatty(STDERR_FILENO) == 1),
      sink_([](const std::string& line) { spdlog::warn("{}", line); }) {}

void WaitNotice::redirect(std::function<void(const std::string&)> sink, bool terminal) {
  sink_ = std::move(sink);
  terminal_ = terminal;
}

void WaitNotice::poll() {
  const auto now = Deadline::Clock::now();
  if (now < next_ || (said_ && !terminal_)) return;
  next_ = now + every_;
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(give_up_.remaining()).count();
  sink_("waiting for " + what_() + " for " + std::to_string(waited) + " s; giving up in " +
        std::to_string(left) + " s");
  said_ = true;
}

WaitNotice::~WaitNotice() {
  if (!said_ || terminal_) return;  // a terminal saw the lines as they came
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(
                          Deadline::Clock::now() - start_).count();
  try {
    sink_("waited " + std::to_string(waited) + " s for " + what_());
  } catch (...) {
  }
}

}  // namespace gpudiag
