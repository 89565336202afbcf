// The CUDA scanner's plan for copying tensors straight out of their file
// mappings (the "windows" reader), in plain C++ so it is unit-tested without
// a GPU (window_plan_test.cpp).
//
// Instead of reading a file with pread into pinned buffers and copying those,
// the scanner page-locks read-only windows of the existing mapping
// (cudaHostRegister) and lets the copy engine read the page cache directly:
// each byte crosses host memory once. This file decides, with no CUDA in it:
//   - which views go that way (those in a mapping holding at least
//     min_mapping_bytes of tensors; the rest stay on the pread path, since a
//     registration per small file costs more than it saves);
//   - chunks of at most chunk_bytes in a device buffer: views in file order,
//     each contiguous run of a mapping (gaps up to max_gap are copied along)
//     placed at a device offset congruent to its file offset modulo 16, so a
//     tensor aligned in the file is aligned on the device and the kernel's
//     16-byte loads line up; a tensor larger than what is left is cut at an
//     element boundary, a copy may be cut anywhere;
//   - windows: the pages a chunk's copies read, within one cell of a grid of
//     window_bytes over each mapping, so two windows never share a page;
//   - the order of registrations: window i is registered after windows up to
//     i - live_windows are unregistered, so at most live_windows are pinned at
//     once. A chunk's windows span fewer than live_windows ids, which is what
//     keeps the scanner from waiting on itself (see plan_windows).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "numerics/scan/scan_plan.h"
#include "numerics/scan/tensor.h"

namespace gpudiag::numerics {

/// Where a view lies in a mapping: mapping index `mapping` (< 0: in none) at
/// byte `offset`.
struct WindowSource {
  int mapping = -1;
  std::uint64_t offset = 0;
};

/// A mapping: its first byte's address (page-aligned) and its length.
struct MappedRange {
  const std::uint8_t* base = nullptr;
  std::uint64_t size = 0;
};

struct WindowLimits {
  std::uint64_t chunk_bytes = std::uint64_t{64} << 20;    ///< a device buffer
  std::size_t max_segments = 16384;                       ///< pieces a chunk
  std::uint64_t window_bytes = std::uint64_t{128} << 20;  ///< grid cell; >= chunk_bytes
  std::size_t live_windows = 4;                           ///< registered at once; >= 2
  std::uint64_t page_bytes = 4096;
  std::uint64_t max_gap = std::uint64_t{64} << 10;  ///< bytes between tensors copied along
  std::uint64_t min_mapping_bytes = std::uint64_t{4} << 20;
};

/// Pages [begin, end) of mapping `mapping`, registered before chunk
/// `first_chunk` is copied and unregistered once chunk `retire_after` was
/// copied (and every earlier window unregistered).
struct HostWindow {
  int mapping = 0;
  std::uint64_t begin = 0, end = 0;
  std::size_t first_chunk = 0, last_chunk = 0, retire_after = 0;
};

/// `bytes` of the mapping of window `window` from `offset` (in the mapping)
/// to `dst_offset` of the chunk's device buffer.
struct WindowCopy {
  std::uint32_t window = 0;
  std::uint64_t offset = 0, dst_offset = 0, bytes = 0;
};

struct WindowChunk {
  std::vector<WindowCopy> copies;
  std::vector<StagedPiece> pieces;  ///< staging_offset: in the device buffer
  std::uint64_t bytes = 0;          ///< end of the last copy in the buffer
  std::uint32_t windows_through = 0;  ///< windows [0, this) registered before the copies
};

struct WindowPlan {
  std::vector<HostWindow> windows;
  std::vector<WindowChunk> chunks;
  std::vector<std::uint32_t> pread_views;  ///< non-empty views left to the pread path
};

/// The plan for `views` (`sources` one per view, indices into `mappings`).
/// Every element of every view chosen lands in exactly one piece.
WindowPlan plan_windows(std::span<const TensorView> views, std::span<const WindowSource> sources,
                        std::span<const MappedRange> mappings, const WindowLimits& limits = {});

/// The sources of `views` from the mapping registry (mapped_file.h): each
/// view's mapping by address, so two mappings of one file are two mappings.
struct MappedSources {
  std::vector<WindowSource> sources;
  std::vector<MappedRange> mappings;
};
MappedSources find_mapped_sources(std::span<const TensorView> views);

}  // namespace gpudiag::numerics
