// Host-side planning for the CUDA scanner, in plain C++ so it is unit-tested
// without a GPU (scan_plan_test.cpp):
//   - plan_chunks packs tensors into staging-buffer-sized chunks: each piece
//     at a 16-byte-aligned offset (so the kernel's 16-byte loads line up),
//     tensors larger than what is left split at element boundaries, at most
//     max_segments pieces a chunk (the kernel's table), and the bytes to
//     fetch as few reads as possible (pieces contiguous both in the file and
//     in the buffer are one pread);
//   - split_at_parts cuts a chunk's reads at fixed parts of its buffer, so
//     each part's copy starts as soon as that part is read;
//   - Ring says which pinned and device buffer chunk k uses and whose
//     completion it waits for;
//   - choose_by_rates is --device auto's decision from measured rates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "numerics/scan/tensor.h"

namespace gpudiag::numerics {

/// Where a view's bytes can be read from: file `file` (an index the caller
/// keeps) at `offset`, or (file < 0) only from host memory at view.data.
struct ViewSource {
  int file = -1;
  std::uint64_t offset = 0;
};

/// Bytes to put at `staging_offset` of a chunk's buffer: from file `file` at
/// `offset`, or from host memory at `host` when file < 0.
struct StagedRead {
  int file = -1;
  std::uint64_t offset = 0;
  const std::uint8_t* host = nullptr;
  std::uint64_t staging_offset = 0, bytes = 0;
};

/// A piece of tensor `tensor` in the chunk: `count` elements from element
/// `first`, at `staging_offset` of the buffer.
struct StagedPiece {
  std::uint32_t tensor = 0;
  DType dtype = DType::F32;
  bool swap = false;
  std::uint64_t first = 0, count = 0, staging_offset = 0;
};

struct Chunk {
  std::vector<StagedRead> reads;
  std::vector<StagedPiece> pieces;
  std::uint64_t bytes = 0;  ///< end of the last piece in the buffer
};

inline constexpr std::uint64_t kStagingAlign = 16;

/// Chunks holding every element of `views` (empty views get none), in view
/// order. `sources` is empty or one per view. `capacity` is a multiple of
/// kStagingAlign; `max_segments` >= 1.
std::vector<Chunk> plan_chunks(std::span<const TensorView> views,
                               std::span<const ViewSource> sources, std::uint64_t capacity,
                               std::size_t max_segments);
/// As above over the views at indices `which` only (in that order); pieces
/// name the views by their index in `views`.
std::vector<Chunk> plan_chunks(std::span<const TensorView> views,
                               std::span<const ViewSource> sources,
                               std::span<const std::uint32_t> which, std::uint64_t capacity,
                               std::size_t max_segments);

/// The staging ring: `host_slots` pinned buffers and `device_slots` device
/// buffers used round-robin. Chunk k may be filled once chunk k - host_slots
/// finished its copy to the device, and copied once chunk k - device_slots
/// finished its scan.
struct Ring {
  std::size_t host_slots = 3, device_slots = 2;
  std::size_t host_slot(std::size_t k) const { return k % host_slots; }
  std::size_t device_slot(std::size_t k) const { return k % device_slots; }
  /// The chunk whose copy must finish before chunk k is filled, if any.
  std::optional<std::size_t> fill_waits_for(std::size_t k) const {
    if (k < host_slots) return std::nullopt;
    return k - host_slots;
  }
  /// The chunk whose scan must finish before chunk k is copied in, if any.
  std::optional<std::size_t> copy_waits_for(std::size_t k) const {
    if (k < device_slots) return std::nullopt;
    return k - device_slots;
  }
};

/// A chunk's reads cut into `parts` lists of about equal bytes (a read
/// longer than its share is cut too, keeping file offset and staging offset
/// in step), so several threads fill one chunk. Together they cover exactly
/// the bytes of `reads`; a list may be empty when there are few bytes.
std::vector<std::vector<StagedRead>> split_reads(std::span<const StagedRead> reads,
                                                 std::size_t parts);

/// A chunk's reads cut at the staging buffer's multiples of `part_bytes`:
/// list p holds what lands in [p * part_bytes, (p + 1) * part_bytes), so
/// part p can be copied to the device as soon as its list is read, whatever
/// the tensors' boundaries. ceil(chunk_bytes / part_bytes) lists (at least
/// one); a list is empty where only padding falls.
std::vector<std::vector<StagedRead>> split_at_parts(std::span<const StagedRead> reads,
                                                    std::uint64_t chunk_bytes,
                                                    std::uint64_t part_bytes);

/// --device auto: the GPU when its measured rate (bytes/s, reading, copying
/// and scanning the same sample the CPU scanned) beats the CPU's by more
/// than `margin` (0.1: 10%, for noise: on a tie the CPU needs no GPU memory),
/// else the CPU. `why` says both rates and which won, for the log.
struct AutoChoice {
  bool gpu = false;
  std::string why;
};
AutoChoice choose_by_rates(double cpu_bytes_per_s, double gpu_bytes_per_s,
                           std::uint64_t sample_bytes, double margin = 0.1);

}  // namespace gpudiag::numerics
