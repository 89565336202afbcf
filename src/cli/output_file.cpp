// write_output_file() (commands.h): the --json files of check and bench.
// Written through a descriptor so that every failure is seen: open, each
// write (a full disk, /dev/full) and close.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/commands.h"
#include "report/status_line.h"
#include "util/error.h"

namespace gpudiag::cli {

int write_output_file(const std::string& option, const std::string& path, const std::string& text) {
  auto fail = [&](const char* step) {
    std::fprintf(stderr, "gpudiag: %s %s: cannot %s it: %s; try: a writable path on a disk with "
                 "space\n", option.c_str(), path.c_str(), step, std::strerror(errno));
    return static_cast<int>(ExitCode::usage);
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("open");
  if (!write_all(fd, text)) {
    const int saved = errno ? errno : EIO;
    ::close(fd);
    errno = saved;
    return fail("write");
  }
  if (::close(fd) != 0) return fail("close");
  return 0;
}

}  // namespace gpudiag::cli
