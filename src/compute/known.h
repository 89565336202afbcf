// The known checksums: data/compute-checksums.json, compiled into the binary
// (cmake/EmbedFiles.cmake, src/compute/CMakeLists.txt), holds each GEMM's
// checksum per GPU model, NVIDIA driver release and compute kernel version
// (compute/math.h's kComputeKernelVersion), as a known-good GPU gave them.
// Where a rank's (device, model, driver, kernel) has an exact entry, that
// entry is the reference for it, even with one rank and even against the
// majority of its peers; with no exact entry nothing here judges anything
// and the comparison across ranks (compute/judge.h) is all there is. A "*"
// driver matches any driver (the host backend's arithmetic depends on none),
// and a "*" model is allowed only for the host, whose arithmetic is IEEE's
// on every CPU (compute/arith.cpp). A table out of shape is refused whole,
// with one line saying why, and judges nothing.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compute/judge.h"
#include "compute/result.h"

namespace gpudiag {

struct KnownChecksums {
  std::string device;  ///< "gpu" or "host"
  std::string model;   ///< as ComputeRecord::model carries it; "*" (host only)
  std::string driver;  ///< "550.54.15", or "*"
  int kernel = 0;      ///< kComputeKernelVersion
  std::vector<std::pair<std::string, std::string>> checksums;  ///< "bf16 GEMM" -> 16 hex digits
};

struct KnownTable {
  std::vector<KnownChecksums> entries;
  std::string error;  ///< why the table was refused ("" when it was read)
};

/// The table's bounds: the file, its entries, its nesting.
inline constexpr std::size_t kMaxKnownBytes = 1 << 20;
inline constexpr std::size_t kMaxKnownEntries = 4096;

/// Reads the table's JSON text; anything out of shape refuses it whole, with
/// `error` naming what and where.
KnownTable parse_known_checksums(std::string_view text);

/// The compiled-in table, read once.
const KnownTable& known_checksums();

/// The entry whose key is exactly this record's (see the header), or null.
const KnownChecksums* find_known(const KnownTable& t, const ComputeRecord& r);

/// Judges a rank that ran (and was stable) against its exact entry, if any:
/// sets `known` ("matches"/"differs") and, as the reference for that key,
/// `judged` ("agrees"/"differs") and `finding`; the tallies of its model
/// (compute/judge.h) only add how many peers agree. No entry: nothing changes.
void judge_known(const KnownTable& t, const ComputeTallies& tallies, ComputeRecord& mine);

/// The NVIDIA driver's release from /proc/driver/nvidia/version's first line
/// ("550.54.15"), read bounded; "" when there is none.
std::string nvidia_driver_release(const std::string& path = "/proc/driver/nvidia/version");

}  // namespace gpudiag
