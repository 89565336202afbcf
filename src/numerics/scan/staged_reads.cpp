// StagingFiles (staged_reads.h): files found through the mapping registry,
// reopened by path and kept only when still the mapped file.
#include "numerics/scan/staged_reads.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "numerics/formats/mapped_file.h"
#include "util/error.h"

namespace gpudiag::numerics {

StagingFiles::StagingFiles(std::span<const TensorView> views) : sources_(views.size()) {
  std::map<std::string, int> index;  // path -> file index, or -1: read from memory
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (views[i].count == 0) continue;
    const auto src = mapped_source_of(views[i].data);
    if (!src) continue;
    auto [it, inserted] = index.try_emplace(src->path, -1);
    if (inserted) {
      const int fd = ::open(src->path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      struct stat st {};
      if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
          static_cast<std::uint64_t>(st.st_dev) == src->dev &&
          static_cast<std::uint64_t>(st.st_ino) == src->ino) {
        it->second = static_cast<int>(fds_.size());
        fds_.push_back(fd);
        paths_.push_back(src->path);
      } else if (fd >= 0) {
        ::close(fd);  // renamed over since it was mapped: the mapping holds the old file
      }
    }
    if (it->second >= 0) sources_[i] = {it->second, src->offset};
  }
}

StagingFiles::~StagingFiles() {
  for (int fd : fds_) ::close(fd);
}

void StagingFiles::fill(std::span<const StagedRead> reads, std::uint8_t* buffer) const {
  for (const StagedRead& r : reads) {
    std::uint8_t* dst = buffer + r.staging_offset;
    if (r.file < 0) {
      std::memcpy(dst, r.host, r.bytes);
      continue;
    }
    std::uint64_t done = 0;
    while (done < r.bytes) {
      const ssize_t n = ::pread(fds_[r.file], dst + done, r.bytes - done,
                                static_cast<off_t>(r.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw Error(ExitCode::usage, paths_[r.file] + ": read failed: " + std::strerror(errno),
                    "check the file system (dmesg), or scan on the CPU with --device cpu");
      if (n == 0)
        throw UsageError(paths_[r.file] +
                             ": the file changed while being read (it was truncated or rewritten "
                             "under gpudiag scan)",
                         "let the writer finish, or scan a copy, and run gpudiag scan again");
      done += static_cast<std::uint64_t>(n);
    }
  }
}

}  // namespace gpudiag::numerics
