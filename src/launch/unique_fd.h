// UniqueFd: sole owner of a file descriptor, closed on destruction.
//
// The launcher holds many descriptors at once (two pipes per child, the
// signal pipe, /dev/null for the children's stdin); owning each one in a
// UniqueFd means an early return or an exception cannot leak one into a
// child or past the end of the job.
#pragma once

#include <unistd.h>

#include <utility>

namespace gpudiag::launch {

class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of `fd` (-1 means none).
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Closes the current descriptor (if any) and owns `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  /// Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

}  // namespace gpudiag::launch
