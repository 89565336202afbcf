// A read-only memory mapping of a whole file (RAII). Readers parse straight
// from the mapping, so scanning a 40 GB dump allocates nothing per element.
#pragma once

#include <string>

#include "numerics/tensor.h"

namespace gpudiag::numerics {

class MappedFile {
 public:
  /// Maps `path` read-only. Throws UsageError naming the file when it cannot
  /// be opened, is not a regular file, or cannot be mapped.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  /// The file's bytes (empty for an empty file).
  Bytes bytes() const { return {static_cast<const std::uint8_t*>(addr_), size_}; }

 private:
  std::string path_;
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace gpudiag::numerics
