// write_file() and check_file_target() (file_out.h).
#include "util/file_out.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "util/error.h"
#include "util/fd_write.h"
#include "util/file_kind.h"
#include "util/text.h"

namespace gpudiag {

namespace {

/// /dev/stdout, /dev/stderr and /dev/fd/N: links to this process's own
/// descriptors, the one kind of link `through` follows.
bool own_descriptor(const std::string& path) {
  if (path == "/dev/stdout" || path == "/dev/stderr") return true;
  const std::string fd = "/dev/fd/";
  if (path.rfind(fd, 0) != 0 || path.size() == fd.size() || path.size() > fd.size() + 6) return false;
  for (std::size_t i = fd.size(); i < path.size(); ++i)
    if (path[i] < '0' || path[i] > '9') return false;
  return true;
}

bool through_kind(mode_t m) { return S_ISREG(m) || S_ISCHR(m) || S_ISFIFO(m); }

/// A FIFO's reader that takes nothing for this long is taken as none.
constexpr int kFifoStallMs = 10000;

/// Another user's file reached through a second name: a hard link planted in
/// a folder this user writes (where fs.protected_hardlinks is off).
bool foreign_hard_link(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_nlink > 1 && st.st_uid != ::geteuid();
}
constexpr const char* kForeignLink =
    "is a hard link to a file of another user (gpudiag writes through no second name of "
    "another user's file)";

/// Writes all of `text` to the non-blocking FIFO `fd`, waiting for its reader
/// at most kFifoStallMs at a time; false with errno ETIMEDOUT when it stalls.
bool write_fifo(int fd, const std::string& text) {
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;
    pollfd p{fd, POLLOUT, 0};
    const int r = ::poll(&p, 1, kFifoStallMs);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = ETIMEDOUT;
    if (r <= 0 || (p.revents & (POLLERR | POLLHUP))) {
      if (r > 0) errno = EPIPE;
      return false;
    }
  }
  return true;
}

std::string why_refused(const std::string& path, WriteMode mode) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};  // absent: created
  if (mode == WriteMode::replace) {
    if (S_ISREG(st.st_mode)) return {};
    return "is " + std::string(S_ISLNK(st.st_mode) ? "a symbolic link" : file_kind(st.st_mode)) +
           ", not a regular file (the report replaces the file by a rename)";
  }
  if (S_ISLNK(st.st_mode))
    return own_descriptor(path) ? std::string()
                                : "is a symbolic link (gpudiag writes through no link but "
                                  "/dev/stdout, /dev/stderr and /dev/fd/N)";
  if (S_ISDIR(st.st_mode)) return "is a folder";
  if (!through_kind(st.st_mode)) return "is " + file_kind(st.st_mode) + ", not a file to write";
  if (foreign_hard_link(st)) return kForeignLink;
  return {};
}

const char* kTry = "a path of a regular file in a folder you can write";

int refuse(const std::string& option, const std::string& path, const std::string& why) {
  std::fprintf(stderr, "gpudiag: %s %s %s; try: %s\n", option.c_str(), clean_text(path).c_str(),
               why.c_str(), kTry);
  return static_cast<int>(ExitCode::usage);
}

int failed(const std::string& option, const std::string& path, const char* step, int err) {
  std::fprintf(stderr, "gpudiag: %s %s: cannot %s it: %s; try: a writable path on a disk with "
               "space\n", option.c_str(), clean_text(path).c_str(), step, std::strerror(err));
  return static_cast<int>(ExitCode::usage);
}

int write_through(const std::string& option, const std::string& path, const std::string& text) {
  const bool own = own_descriptor(path);
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (own ? 0 : O_NOFOLLOW);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0 && errno == ELOOP) return refuse(option, path, "is a symbolic link");
  if (fd < 0 && errno == ENXIO) return refuse(option, path, "is a FIFO no process reads");
  if (fd < 0) return failed(option, path, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !through_kind(st.st_mode)) {
    ::close(fd);
    return refuse(option, path, "is " + file_kind(st.st_mode) + ", not a file to write");
  }
  if (foreign_hard_link(st)) {
    ::close(fd);
    return refuse(option, path, kForeignLink);
  }
  // A FIFO stays non-blocking (a reader that holds it open and never reads
  // is a stall, not a hang); anything else blocks again for the write. A
  // regular file is emptied first (not at open: a device or FIFO has
  // nothing to truncate).
  const bool fifo = S_ISFIFO(st.st_mode) && !own;
  if (fifo) {
    const bool ok = write_fifo(fd, text);
    const int e = errno;
    ::close(fd);
    if (!ok && e == ETIMEDOUT)
      return refuse(option, path, "is a FIFO whose reader took nothing for " +
                                      std::to_string(kFifoStallMs / 1000) + " s");
    return ok ? 0 : failed(option, path, "write", e);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (S_ISREG(st.st_mode) && !own && ::ftruncate(fd, 0) != 0) {
    const int e = errno;
    ::close(fd);
    return failed(option, path, "empty", e);
  }
  if (!write_all(fd, text)) {
    const int e = errno ? errno : EIO;
    ::close(fd);
    return failed(option, path, "write", e);
  }
  if (::close(fd) != 0) return failed(option, path, "close", errno);
  return 0;
}

int write_replace(const std::string& option, const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  // Not ending in the target's suffix: node_exporter reads only *.prom.
  std::string tmpl = dir + "/." + p.filename().string() + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);  // O_CREAT|O_EXCL, a random name
  if (fd < 0) return failed(option, path, "create a file beside", errno);
  const std::string tmp(name.data());
  auto fail = [&](const char* step, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return failed(option, path, step, err);
  };
  if (!write_all(fd, text)) return fail("write", errno ? errno : EIO);
  if (::fsync(fd) != 0 && errno != EINVAL) return fail("write", errno);
  if (::fchmod(fd, 0644) != 0) return fail("write", errno);
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return failed(option, path, "write", e);
  }
  // The target may have changed since it was checked: rename replaces the
  // name itself and never writes through what is there.
  if (const std::string why = why_refused(path, WriteMode::replace); !why.empty()) {
    ::unlink(tmp.c_str());
    return refuse(option, path, why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return failed(option, path, "rename onto", e);
  }
  return 0;
}

}  // namespace

int open_own_file(const std::string& path, int mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                        static_cast<mode_t>(mode));
  if (fd < 0) return -1;
  struct stat st {};
  int err = 0;
  if (::fstat(fd, &st) != 0)
    err = errno;
  else if (!S_ISREG(st.st_mode))
    err = EINVAL;
  else if (foreign_hard_link(st))
    err = EPERM;
  else if (::ftruncate(fd, 0) != 0)
    err = errno;
  if (err) {
    ::close(fd);
    errno = err;
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void check_file_target(const std::string& option, const std::string& path, WriteMode mode) {
  if (path.empty() || path == "-") return;
  namespace fs = std::filesystem;
  const std::string shown = clean_text(path);
  std::error_code dir_ec;
  if (std::filesystem::is_directory(path, dir_ec))
    throw UsageError(option + " " + shown + " is a folder",
                     "give a file name, e.g. " + shown + "/report.json");
  if (const std::string why = why_refused(path, mode); !why.empty())
    throw UsageError(option + " " + shown + " " + why, kTry);
  if (own_descriptor(path)) return;
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (fs::is_directory(p, ec))
    throw UsageError(option + " " + shown + " is a folder",
                     "give a file name, e.g. " + shown + "/report.json");
  if (!fs::is_directory(dir, ec))
    throw UsageError(option + " " + shown + ": the folder " + clean_text(dir.string()) +
                         " does not exist",
                     "create it first, or give a path in an existing folder");
  if (::access(dir.c_str(), W_OK) != 0 && (mode == WriteMode::replace || !fs::exists(p, ec)))
    throw UsageError(option + " " + shown + ": the folder " + clean_text(dir.string()) +
                         " is not writable by this user",
                     "give a path in a folder you can write");
}

int write_file(const std::string& option, const std::string& path, const std::string& text,
               WriteMode mode) {
  if (const std::string why = why_refused(path, mode); !why.empty())
    return refuse(option, path, why);
  return mode == WriteMode::through ? write_through(option, path, text)
                                    : write_replace(option, path, text);
}

}  // namespace gpudiag
