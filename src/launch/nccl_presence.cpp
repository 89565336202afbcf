// maps_show_nccl() and any_rank_maps_nccl() (nccl_presence.h).
#include "launch/nccl_presence.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace gpudiag::launch {

bool maps_show_nccl(std::string_view maps) {
  std::size_t start = 0;
  while (start < maps.size()) {
    std::size_t end = maps.find('\n', start);
    if (end == std::string_view::npos) end = maps.size();
    std::string_view line = maps.substr(start, end - start);
    start = end + 1;
    // "ADDR PERMS OFFSET DEV INODE PATH": the path is what follows the last '/'.
    const std::size_t slash = line.rfind('/');
    if (slash == std::string_view::npos) continue;
    const std::string_view base = line.substr(slash + 1);
    if (base.starts_with("libnccl") || base.starts_with("libtorch_cuda")) return true;
  }
  return false;
}

bool any_rank_maps_nccl(const std::vector<pid_t>& pids) {
  constexpr std::size_t kMaxMaps = 8u << 20;
  for (pid_t pid : pids) {
    const std::string path = "/proc/" + std::to_string(pid) + "/maps";
    if (pid <= 0) continue;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT || errno == ESRCH) continue;  // gone (a rank that ended): says nothing
      return true;                                      // not allowed to look: not known, ask
    }
    std::string text;
    char buf[65536];
    ssize_t n = 0;
    while (text.size() < kMaxMaps && (n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, n);
    ::close(fd);
    if (n < 0 || maps_show_nccl(text)) return true;
  }
  return false;
}

}  // namespace gpudiag::launch
