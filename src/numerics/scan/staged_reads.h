// Filling a pinned staging buffer with a chunk's bytes (scan_plan.h): from
// the files with pread, not by touching their mappings, so a reader thread
// copies straight from the page cache into pinned memory; from host memory
// with memcpy where a view is not in a mapped file (or its path now names
// another file). Plain C++: unit-tested without a GPU.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "numerics/scan/scan_plan.h"
#include "numerics/scan/tensor.h"

namespace gpudiag::numerics {

/// The files a scan reads, opened once per scan and closed on destruction.
class StagingFiles {
 public:
  /// One source per view: the view's file (when mapped_source_of finds it and
  /// the path still names that file, by st_dev and st_ino) at its offset, else
  /// host memory.
  explicit StagingFiles(std::span<const TensorView> views);
  ~StagingFiles();
  StagingFiles(const StagingFiles&) = delete;
  StagingFiles& operator=(const StagingFiles&) = delete;

  const std::vector<ViewSource>& sources() const { return sources_; }
  /// Performs `reads` into `buffer`. A file that ends before a read does was
  /// truncated since it was mapped: UsageError naming it, as the mapping's
  /// SIGBUS guard says it.
  void fill(std::span<const StagedRead> reads, std::uint8_t* buffer) const;
  /// Files opened for pread (the rest is copied from memory).
  std::size_t file_count() const { return fds_.size(); }

 private:
  std::vector<ViewSource> sources_;
  std::vector<int> fds_;
  std::vector<std::string> paths_;
};

}  // namespace gpudiag::numerics
