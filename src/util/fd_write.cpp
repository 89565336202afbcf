// write_all() (fd_write.h).
#include "util/fd_write.h"

#include <unistd.h>

#include <cerrno>

namespace gpudiag {

bool write_all(int fd, const std::string& text) {
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;  // errno says why (stdout closed, disk full, ...)
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace gpudiag
