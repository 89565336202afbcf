// The replica checksum files, `gpudiag-replica-sums/2`: what ReplicaCheck
// (scripts/replica_check.py) appends, one file per rank
// (`rank00003.replica.jsonl`, `replica.jsonl` for a single process), one
// JSON object per line: a header naming the format, the rank, the global
// ranks of its replica group and the tensors; then one line per checked step
// with one 16-hex-digit checksum per tensor. Contract: docs/formats.md.
//
// A long run appends many steps, so a file is read as an index: per step a
// 64-bit digest of its row of checksums (the replica checksum of the row's
// bytes), 16 bytes a step; the rows of one step are read again only where the
// digests of a group's ranks differ. Every file is untrusted input: each line
// at most 64 MiB, every field checked, one line naming the file and the line
// otherwise. A last line without its newline (a writer still appending) is
// left out. A new checksum multiplier is a new version: /1 files (the
// multiplier a | 1) are still read, and never compared with /2 files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag::numerics {

inline constexpr const char* kReplicaFormat = "gpudiag-replica-sums/2";
/// The version before it (checksum multiplier a | 1): read, compared only with its own.
inline constexpr const char* kReplicaFormatV1 = "gpudiag-replica-sums/1";

/// True for a path the replica reader takes: a name ending in "replica.jsonl".
bool is_replica_path(const std::string& path);

struct ReplicaFile {
  std::string path;
  std::string format;              ///< kReplicaFormat or kReplicaFormatV1
  int rank = -1;                   ///< -1: a single process
  std::vector<int> group;          ///< global ranks of its replica group; empty unknown
  std::vector<std::string> names;  ///< the tensors, in checksum order
  std::map<std::uint64_t, std::uint64_t> digests;  ///< step -> digest of its row
};

/// Reads the header(s) and indexes the steps. Throws UsageError naming the
/// file and line on anything malformed, or headers naming different tensors.
ReplicaFile index_replica_file(const std::string& path);

/// The checksums of `step` in the file (the last such line); nullopt when absent.
std::optional<std::vector<std::uint64_t>> replica_row(const ReplicaFile& file, std::uint64_t step);

}  // namespace gpudiag::numerics
