// A rank's verdict for the launcher (verdict_file.h): bounded reads, a plain
// write through the one file writer's rules (no following a planted link).
#include "launch/verdict_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "util/text.h"

namespace gpudiag::launch {

namespace {
constexpr std::size_t kMaxVerdict = 200;
}

std::optional<std::string> read_verdict(const std::string& path) {
  if (path.empty()) return std::nullopt;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  char buf[kMaxVerdict];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  std::string text(buf, static_cast<std::size_t>(n));
  text = text.substr(0, text.find('\n'));
  if (text.empty()) return std::nullopt;
  return clean_text(text);
}

void write_verdict(const std::string& line) {
  const char* path = std::getenv("GPUDIAG_VERDICT_FILE");
  if (!path || !*path) return;
  // The launcher's own folder: a new file, never through a link or a FIFO.
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                        0600);
  if (fd < 0) return;
  const std::string text = line.substr(0, kMaxVerdict - 1) + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

}  // namespace gpudiag::launch
