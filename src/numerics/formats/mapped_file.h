// A read-only memory mapping of a whole regular file (RAII). Readers parse straight
// from the mapping, so scanning a 40 GB dump allocates nothing per element.
//
// Files that are not files: the path is stat()ed before it is opened and anything but a
// regular file (a FIFO, a device, a socket) is refused with one line naming what it is;
// the open itself uses O_NONBLOCK, so a FIFO swapped in between cannot block it either.
//
// Files that change: a mapped file truncated by someone else while it is scanned makes
// the next access to the lost pages raise SIGBUS, on whichever thread touches them (a CPU
// scanner thread, the CUDA scanner's staging copy, a header parser). Every live mapping is
// registered with its path; a process-wide SIGBUS handler that finds the faulting address
// in a registered mapping writes one line, "gpudiag: FILE: the file changed while being
// read ...", and exits with status 2. Nothing can be unwound from inside a fault at an
// arbitrary instruction of a vectorised loop, so the handler ends the process itself, with
// async-signal-safe calls only (write, _exit). A SIGBUS anywhere else is handed to the
// previous disposition (by default: the process dies with SIGBUS, as before).
#pragma once

#include "util/file_kind.h"

#include <cstdint>
#include <optional>
#include <string>

#include "numerics/scan/tensor.h"

namespace gpudiag::numerics {

class MappedFile {
 public:
  /// Maps `path` read-only. Throws UsageError naming the file when it cannot be opened,
  /// is not a regular file ("is a FIFO (named pipe)", "is a character device", ...), or
  /// cannot be mapped. Never blocks on a FIFO.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  /// The file's bytes (empty for an empty file). Reading them after the file was
  /// truncated ends the process with one line and exit status 2 (see above).
  Bytes bytes() const { return {static_cast<const std::uint8_t*>(addr_), size_}; }

 private:
  std::string path_;
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

/// The live mapping holding address `p`: its file's path and identity
/// (st_dev, st_ino when mapped) and `p`'s offset in the file; nullopt when `p`
/// is in no MappedFile. The CUDA scanner reads the file with pread through
/// it instead of touching the mapping, after checking the path still names
/// the same file, or registers page-aligned windows of the mapping itself
/// (`size`: the mapping's length in bytes; it starts at p - offset).
struct MappedSource {
  std::string path;
  std::uint64_t dev = 0, ino = 0, offset = 0, size = 0;
};
std::optional<MappedSource> mapped_source_of(const void* p);

using gpudiag::file_kind;  // util/file_kind.h

}  // namespace gpudiag::numerics
