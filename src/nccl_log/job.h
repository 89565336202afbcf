// A job's NCCL logs as one: every line of every file, sorted into processes.
//
// Input is any mix of files and directories: one interleaved stdout capture of all ranks,
// per-rank NCCL_DEBUG_FILE files, or a directory of them (reader.h says which paths are read
// and how bytes become lines, with every size bounded). Lines are parsed one at a time
// (streaming; a file is never held in memory) and handed to the process they name (host:pid),
// found through a hash map, so a job of a million processes reads in linear time. Lines
// without a host part go to a process named after their file. The bare "NCCL version X" line,
// which has no host part, goes to the process of the previous NCCL line in the same file and
// launcher stream (that is where NCCL prints it), or the next one. Files that are not NCCL
// logs (gpudiag's own reports above all, whose quoted evidence would count twice) are
// recognised and skipped (sniff.h). Lines that are not NCCL lines but PyTorch's watchdog lines
// or NCCL's DIAG report (side_line.h) are gathered per rank (side_ranks.h); a file holding only
// such lines is a log too.
#pragma once

#include <istream>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "nccl_log/rank_summary.h"
#include "nccl_log/reader.h"
#include "nccl_log/side_ranks.h"

namespace gpudiag::nccl_log {

struct SourceFile {
  std::string path;
  std::size_t lines = 0;       ///< all lines
  std::size_t nccl_lines = 0;  ///< lines that parsed as NCCL lines
  std::size_t side_lines = 0;  ///< PyTorch watchdog and NCCL DIAG lines
};

/// A file of a run directory that was not read as a log, and why (sniff.h).
struct SkippedFile {
  std::string path;
  std::string why;  ///< "a gpudiag report", "binary data", "no NCCL line"
};

struct Job {
  std::vector<SourceFile> files;          ///< in the order read
  std::vector<SkippedFile> skipped;       ///< not NCCL logs, in the order met
  std::vector<ProcessSummary> processes;  ///< sorted by rank, then host, then pid
  std::size_t nccl_lines = 0;
  std::size_t torch_lines = 0;   ///< PyTorch ProcessGroupNCCL watchdog lines (side_line.h)
  std::size_t diag_lines = 0;    ///< NCCL DIAG lines
  std::vector<TorchRank> torch;  ///< what each rank's watchdog lines say
  std::vector<SideEvent> diag;   ///< the NCCL DIAG lines (the first 64)
  std::size_t other_lines = 0;   ///< non-blank lines of none of these kinds (binary ones too)
  std::size_t junk_lines = 0;    ///< binary runs and over-long lines, skipped unread

  /// Host names seen (empty names left out).
  std::set<std::string> hosts() const;
  /// True when the job spans nodes: several hosts, nNodes > 1, or traffic over NET.
  bool multi_node() const;
  /// Position of a file in `files` (for ordering evidence), files.size() when unknown.
  std::size_t file_index(const std::string& path) const;

  std::unordered_map<std::string, std::size_t> file_positions;  ///< path -> index in files
};

/// Builds a Job from streams; used by read_job and by tests.
class JobBuilder {
 public:
  explicit JobBuilder(InputLimits limits = {}) : limits_(limits), side_(limits.max_processes) {}
  /// Reads every line of `in`; `name` is how evidence will cite the file.
  void add_stream(std::istream& in, const std::string& name);
  /// Reads every line of `source`; throws UsageError past the limits' total input.
  /// `only_if_nccl`: a source without a single NCCL line (nor watchdog or DIAG line) leaves no
  /// trace in the job (its lines are not counted, it is not listed in files) and false is
  /// returned.
  bool add_source(ByteSource& source, const std::string& name, bool only_if_nccl = false);
  /// Sorts the processes and returns the job; the builder is empty afterwards.
  Job finish();

 private:
  /// The process `line` names (created on first sight), with `file` in its files.
  ProcessSummary& process_for(const Line& line, const std::string& file);
  ProcessSummary& touch(std::size_t index, const std::string& file);

  InputLimits limits_;
  std::uint64_t bytes_read_ = 0;
  Job job_;
  SideCollector side_;
  std::unordered_map<std::string, std::size_t> index_;  // process key -> position in processes
  std::vector<std::size_t> last_file_;  // process position -> serial of the file it was last in
  std::size_t file_serial_ = 0;         // of the file being read, counted from 1
  bool fresh_name_ = false;             // no earlier input had the name of this one
};

/// Reads files and directories (directories: every regular file below them, sorted by path);
/// "-" reads standard input (reader.h: list_log_files). gpudiag's own reports are never read;
/// inside a directory, binary files and files without an NCCL line are skipped too (sniff.h).
/// Skipped files are listed in Job::skipped and named in one warning on stderr.
/// Throws UsageError naming the path when one cannot be read or is not a regular file, when a
/// directory holds no files, when the input passes limits.max_bytes, or when no NCCL line (nor
/// watchdog or DIAG line) is found anywhere.
Job read_job(const std::vector<std::string>& paths, const InputLimits& limits = {});

}  // namespace gpudiag::nccl_log
