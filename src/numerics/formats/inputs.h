// Opening what the user named on the command line: directories expand to the
// .safetensors and .npy files in them, every file is memory-mapped and
// parsed (by content, not by extension), and each safetensors file is
// classified as a `gpudiag-frames/1` dump or a plain file of loose tensors.
// A path that is not a regular file (a FIFO, a device, a socket, given directly or found
// in a directory) is refused by name when it is opened, without blocking or reading it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "numerics/formats/mapped_file.h"
#include "numerics/formats/npy.h"
#include "numerics/formats/safetensors.h"

namespace gpudiag::numerics {

inline constexpr std::string_view kFramesFormat = "gpudiag-frames/1";

enum class InputKind { frames, loose_safetensors, npy };

struct InputFile {
  explicit InputFile(MappedFile m) : mapping(std::move(m)) {}

  MappedFile mapping;
  InputKind kind = InputKind::loose_safetensors;
  SafetensorsFile safetensors;     ///< kinds frames and loose_safetensors
  NpyArray npy;                    ///< kind npy
  std::uint64_t batch_number = 0;  ///< kind frames
  int rank = -1;                   ///< kind frames: its "rank" metadata; -1 none

  const std::string& path() const { return mapping.path(); }
};

/// Files named by `paths`: files as given, directories replaced by their
/// *.safetensors and *.npy files (sorted, not recursive). Throws UsageError
/// for a path that does not exist or a directory with no such file.
std::vector<std::string> expand_paths(const std::vector<std::string>& paths);

/// Maps and parses one file: as .npy when it has the .npy magic or name,
/// else as safetensors. Throws UsageError naming the file on any malformed
/// content, or when it is not a regular file ("FILE: is a FIFO (named pipe), not
/// a regular file"). Test-only: with GPUDIAG_TEST_STOP_AFTER_OPEN=1 the process
/// stops itself (SIGSTOP) after each file is parsed, before its data is read.
InputFile open_input(const std::string& path, std::optional<DType> npy_dtype);

/// The kind of the file, checked as open_input() checks it, with the file
/// unmapped again before it returns (a first look at many files holds one
/// mapping at a time). The test stop does not apply.
InputKind inspect_input(const std::string& path, std::optional<DType> npy_dtype);

}  // namespace gpudiag::numerics
