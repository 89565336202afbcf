// Reading log input without trusting it: which paths are read, and bytes cut into lines with
// every size bounded.
//
// Paths: "-" is standard input. A directory is every regular file below it, symlinks followed,
// each directory and each file read once (by device and inode), so a symlink loop ends and a
// file linked twice is not counted twice. A path given directly must be a regular file, or one
// of the descriptors a shell hands over (/dev/stdin, /dev/fd/N as in `<(zcat job.log.gz)`):
// a named FIFO nobody writes would block forever, /dev/zero never ends, so FIFOs, devices and
// sockets are refused with one line naming what they are (inside a directory they are skipped
// with a warning). Files are opened O_NONBLOCK and checked again with fstat, so a path swapped
// for a FIFO between the check and the open cannot block either.
//
// Lines: bytes are read in fixed-size blocks and split on '\n'; only the current line is held,
// up to `max_line` bytes. A longer line is dropped whole and counted as junk. Binary bytes (NUL
// and the other control characters except tab, CR, VT, FF and ESC) are junk too: a run of them
// is dropped and ends the text before it, so a block of NULs (a crashed node's log that the
// file system zero-filled) glued to the next log line leaves that line readable. Line numbers
// count '\n' only, so evidence points at the line a user sees in an editor. The total input is
// capped (`max_bytes`, --max-input) with a one-line error, for a pipe that never ends, and so
// is the number of processes (JobBuilder), which bounds the memory a log can make us hold.
#pragma once

#include "util/file_kind.h"

#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::nccl_log {

inline constexpr std::size_t kMaxLineBytes = 64 * 1024;
// 4 GiB: the INFO logs of a job of thousands of ranks, read in about 40 s;
// an endless pipe stops there instead of after minutes.
inline constexpr std::uint64_t kDefaultMaxInput = std::uint64_t{4} << 30;
/// As many processes as gpudiag accepts ranks (WORLD_SIZE): about 3 KiB of memory each.
inline constexpr std::size_t kMaxProcesses = std::size_t{1} << 20;

struct InputLimits {
  std::uint64_t max_bytes = kDefaultMaxInput;  ///< all files together
  std::size_t max_line = kMaxLineBytes;
  std::size_t max_processes = kMaxProcesses;  ///< distinct host:pid (JobBuilder)
};

/// Where bytes come from: read() returns how many it put in `buf`, 0 at the end, and throws
/// UsageError naming the input on a read error.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual std::size_t read(char* buf, std::size_t n) = 0;
};

/// A std::istream as a ByteSource (tests, and callers that already hold a stream).
class StreamSource final : public ByteSource {
 public:
  StreamSource(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {}
  std::size_t read(char* buf, std::size_t n) override;

 private:
  std::istream& in_;
  std::string name_;
};

/// One piece of text for the line parser.
struct Piece {
  std::string_view text;   ///< without the '\n'; valid until the next call to next()
  std::size_t lineno = 0;  ///< 1-based physical line number
  bool whole = true;       ///< false: a fragment of a line that also holds binary junk
};

/// Cuts a ByteSource into Pieces (see the header comment for the rules).
class LineSplitter {
 public:
  /// `already_read`: bytes of earlier inputs; reading past limits.max_bytes in all throws
  /// UsageError naming `name`.
  LineSplitter(ByteSource& source, std::string name, const InputLimits& limits,
               std::uint64_t already_read = 0);
  /// The next piece; false at the end of the input.
  bool next(Piece& out);

  std::size_t lines() const { return lines_; }  ///< physical lines seen so far
  std::size_t junk() const { return junk_; }    ///< binary runs and over-long lines
  /// Lines that gave no piece although they were not empty: all binary, or over-long.
  std::size_t dropped() const { return dropped_; }
  std::uint64_t bytes() const { return bytes_; }  ///< bytes of this input read so far

 private:
  bool fill();
  bool emit(Piece& out, bool whole);

  ByteSource& source_;
  std::string name_;
  InputLimits limits_;
  std::uint64_t already_read_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
  std::string line_;
  bool clear_ = false;         // line_ was handed out: clear it before appending
  bool skipping_ = false;      // this line passed max_line: drop it up to its '\n'
  bool binary_line_ = false;   // this line held a binary run
  bool in_run_ = false;        // the last byte was binary
  bool line_started_ = false;  // bytes seen after the last newline
  bool gave_piece_ = false;    // a piece of this line was handed out
  std::size_t lineno_ = 1, lines_ = 0, junk_ = 0, dropped_ = 0;
  std::uint64_t bytes_ = 0;
};

/// One file to read, and whether it was found inside a directory (then files that are not
/// NCCL logs are skipped: sniff.h) or named directly.
struct LogFile {
  std::string path;
  bool in_directory = false;
};

/// The files `paths` name, in reading order: "-" becomes "<stdin>" (first), directories
/// their regular files sorted by path. Throws UsageError for a path that does not exist or
/// is not a regular file (see above), a directory that cannot be listed or holds no file.
std::vector<LogFile> list_log_files(const std::vector<std::string>& paths);
/// list_log_files' paths alone.
std::vector<std::string> list_logs(const std::vector<std::string>& paths);

/// Opens one file list_logs returned ("<stdin>": standard input) for reading, never
/// blocking in open. Throws UsageError naming it when it cannot be opened or is no longer a
/// regular file.
std::unique_ptr<ByteSource> open_log(const std::string& path);

using gpudiag::file_kind;  // util/file_kind.h

}  // namespace gpudiag::nccl_log
