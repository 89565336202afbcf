#include "launch/output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gpudiag::launch {

void Sink::write(std::string_view bytes) {
  while (!bytes.empty() && !broken_) {
    auto n = ::write(fd_, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      // A non-blocking terminal or pipe someone else set up: wait until it drains.
      ::usleep(1000);
    } else {
      broken_ = true;
    }
  }
}

Relay::Relay(net::Fd pipe, std::string prefix, Sink& sink)
    : pipe_(std::move(pipe)), splitter_(std::move(prefix)), sink_(&sink) {
  ::fcntl(pipe_.get(), F_SETFL, ::fcntl(pipe_.get(), F_GETFL) | O_NONBLOCK);
}

bool Relay::pump() {
  if (!pipe_.valid()) return false;
  char buf[64 * 1024];
  auto n = ::read(pipe_.get(), buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n < 0 && errno == EAGAIN) return false;
  if (n <= 0) {  // end of stream (or a read error, which ends it too)
    close();
    return false;
  }
  if (file_) file_->sink.write(std::string_view(buf, static_cast<std::size_t>(n)));
  batch_.clear();
  splitter_.feed(std::string_view(buf, static_cast<std::size_t>(n)), batch_);
  if (!saw_status_ && (batch_.find("] is OK (global rank: ") != std::string::npos ||
                       batch_.find("] is broken: ") != std::string::npos))
    saw_status_ = true;
  if (console_) sink_->write(batch_);
  return true;
}

void Relay::drain(int max_reads) {
  for (int i = 0; i < max_reads && pump(); ++i) {
  }
}

void Relay::close() {
  if (!pipe_.valid()) return;
  batch_.clear();
  splitter_.finish(batch_);
  if (console_) sink_->write(batch_);
  pipe_.reset();
}

}  // namespace gpudiag::launch
