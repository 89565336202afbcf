// The history folder: many writers at once, any number of readers, no locks.
//
// Every record is a file of its own, named
//   <YYYYMMDDTHHMMSSZ>-<host>-<pid>-<16 random hex>.json
// and written the way a file appears whole on any file system, NFS included
// (where O_APPEND is not atomic between clients and a lock may not be
// honoured): into a fresh hidden file, `.<name>.tmp`, created with O_EXCL,
// written, fsync'd, then renamed to its name. A reader lists only names that
// do not start with '.', so it never sees a record being written; two writers
// never share a name (pid and 64 random bits), so none overwrites another.
//
// Reading is bounded: at most `max_files` records (the newest, by name), each
// at most kMaxRecordBytes, opened without following links and only if a
// regular file. A record that fails record.h's checks is skipped and counted,
// with the first few reasons kept for the report.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "history/record.h"

namespace gpudiag::history {

/// Writes `r` as a new file in `dir` (created, with its parents, if absent).
/// Returns "" when written, else one line saying what failed: a history that
/// cannot be written never changes a verdict or its exit status.
std::string write_record(const std::string& dir, const Record& r);

/// write_record() of each; the first failure's line, or "".
std::string write_records(const std::string& dir, const std::vector<Record>& records);

struct ReadLimits {
  std::size_t max_files = 200000;
};

struct Folder {
  std::vector<Record> records;           ///< oldest first
  std::size_t skipped = 0;               ///< files that were not a record
  std::vector<std::string> skipped_why;  ///< "<file>: <why>", the first few
  std::size_t not_read = 0;              ///< older records past max_files
};

/// Reads every record of `dir`. Throws UsageError when `dir` is not a
/// readable folder.
Folder read_folder(const std::string& dir, const ReadLimits& limits = {});

/// The file name write_record() gives `r` (without the random part's value:
/// `random_hex` is passed in), for the tests.
std::string record_name(const Record& r, int pid, const std::string& random_hex);

}  // namespace gpudiag::history
