// A job's NCCL logs as one: every line of every file, sorted into processes.
//
// Input is any mix of files and directories: one interleaved stdout capture of all ranks,
// per-rank NCCL_DEBUG_FILE files, or a directory of them. Lines are parsed one at a time
// (streaming; a file is never held in memory) and handed to the process they name
// (host:pid). Lines without a host part go to a process named after their file. The bare
// "NCCL version X" line, which has no host part, goes to the process of the previous NCCL
// line in the same file and launcher stream (that is where NCCL prints it), or the next one.
#pragma once

#include <istream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nccl_log/rank_summary.h"

namespace gpudiag::nccl_log {

struct SourceFile {
  std::string path;
  std::size_t lines = 0;       ///< all lines
  std::size_t nccl_lines = 0;  ///< lines that parsed as NCCL lines
};

struct Job {
  std::vector<SourceFile> files;          ///< in the order read
  std::vector<ProcessSummary> processes;  ///< sorted by rank, then host, then pid
  std::size_t nccl_lines = 0;
  std::size_t other_lines = 0;

  /// Host names seen (empty names left out).
  std::set<std::string> hosts() const;
  /// True when the job spans nodes: several hosts, nNodes > 1, or traffic over NET.
  bool multi_node() const;
  /// Position of a file in `files` (for ordering evidence), files.size() when unknown.
  std::size_t file_index(const std::string& path) const;
};

/// Builds a Job from streams; used by read_job and by tests.
class JobBuilder {
 public:
  /// Reads every line of `in`; `name` is how evidence will cite the file.
  void add_stream(std::istream& in, const std::string& name);
  /// Sorts the processes and returns the job; the builder is empty afterwards.
  Job finish();

 private:
  ProcessSummary& process_for(const Line& line, const std::string& file);

  Job job_;
  std::map<std::string, std::size_t> index_;  // process key -> position in job_.processes
};

/// Reads files and directories (directories: every regular file below them, sorted by path);
/// "-" reads standard input.
/// Throws UsageError naming the path when one cannot be read, when a directory holds no
/// files, or when no NCCL line is found anywhere.
Job read_job(const std::vector<std::string>& paths);

}  // namespace gpudiag::nccl_log
