// Relaying the children's output: each child's stdout and stderr arrive on
// pipes, are cut into whole prefixed lines (LineSplitter), and go out to the
// launcher's own stdout and stderr.
//
// A Relay reads one pipe when poll() says it is ready; a Sink writes whole
// batches of lines to one of the launcher's descriptors. Everything runs on
// the launcher's one poll loop, so lines from different ranks never
// interleave and no thread per child is needed.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "launch/line_splitter.h"
#include "store/socket.h"

namespace gpudiag::launch {

/// One of the launcher's output descriptors (not owned).
class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}

  /// Writes all of `bytes`, retrying short writes and interruptions. Once the
  /// reader is gone (EPIPE, e.g. `| head`) or the descriptor fails, later
  /// writes are dropped: the job still runs to its end and its exit status.
  void write(std::string_view bytes);
  bool broken() const { return broken_; }

 private:
  int fd_;
  bool broken_ = false;
};

/// A per-rank log file (--log-dir): its descriptor and the Sink writing it.
struct LogFile {
  explicit LogFile(net::Fd file) : fd(std::move(file)), sink(fd.get()) {}
  net::Fd fd;
  Sink sink;
};

/// One child stream on its way to a Sink.
class Relay {
 public:
  /// `pipe` is the read end of the child's stdout or stderr pipe.
  Relay(net::Fd pipe, std::string prefix, Sink& sink);

  int fd() const { return pipe_.get(); }
  bool open() const { return pipe_.valid(); }
  /// Reads once from the pipe (call it when poll() reports the fd) and writes
  /// the lines that completes. At end of stream writes the unterminated tail
  /// and closes the pipe. Returns true if it read bytes (more may be waiting).
  bool pump();
  /// Pumps until the pipe is empty or closed, at most `max_reads` times.
  void drain(int max_reads);
  /// Writes the unterminated tail and closes the pipe, even if writers remain.
  void close();
  /// True once a gpudiag status line ("[host-N] is OK (global rank: ...)" or
  /// "[host-N] is broken: ...") went through: the rank's work is done.
  bool saw_status() const { return saw_status_; }
  /// Also writes the stream, as it comes and without prefixes, to `file`
  /// (torchrun's --tee), or only there when `console` is false (--redirects).
  void copy_to(std::shared_ptr<LogFile> file, bool console) {
    file_ = std::move(file);
    console_ = console;
  }

 private:
  net::Fd pipe_;
  LineSplitter splitter_;
  Sink* sink_;
  std::string batch_;
  bool saw_status_ = false;
  std::shared_ptr<LogFile> file_;
  bool console_ = true;
};

}  // namespace gpudiag::launch
