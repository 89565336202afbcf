#include "store/job_token.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/error.h"

namespace gpudiag {

namespace {
std::string octal_mode(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}
}  // namespace

JobSecret read_secret_file(const std::string& path, const std::string& how) {
  const std::string remedy =
      "create it with `umask 077; openssl rand -hex 32 > " + path + "` (or chmod 600 " + path + ")";
  // O_NONBLOCK: a FIFO named as the secret file must not block us; it is
  // refused below as not a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    throw UsageError(how + " " + path + " cannot be read: " + std::strerror(errno), remedy);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UsageError(how + " " + path + " is not a regular file", remedy);
  }
  if (st.st_mode & 077) {
    ::close(fd);
    throw UsageError(how + " " + path + " has mode " + octal_mode(st.st_mode) +
                         ": its group or other users may read it, so it is no secret",
                     "chmod 600 " + path + " (a secret file must be readable only by its owner)");
  }
  std::string key;
  char buf[1024];
  while (key.size() <= kMaxSecretBytes) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    key.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() > kMaxSecretBytes)
    throw UsageError(how + " " + path + " holds more than " + std::to_string(kMaxSecretBytes) +
                         " bytes; a secret is a short random string",
                     remedy);
  if (key.empty()) throw UsageError(how + " " + path + " is empty", remedy);
  return {std::move(key), how + " " + path};
}

std::string random_secret() {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1)
    throw Error(ExitCode::internal, "cannot draw a random job secret (OpenSSL RAND_bytes failed)");
  std::string hex;
  for (unsigned char b : raw) {
    char h[3];
    std::snprintf(h, sizeof h, "%02x", b);
    hex += h;
  }
  return hex;
}

}  // namespace gpudiag
