// kmsg.h: the reader. One loop serves the device (a record per read()) and
// a regular file (many per read()): bytes are split at newlines, a line past
// max_record is cut and the rest of it dropped, a line the source ends in the
// middle of is dropped (the device never does that; a file that does was cut
// while written). Reading stops at EAGAIN, end of file, an error, or
// max_read_bytes, whichever comes first.
#include "hw/kmsg.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "util/text.h"

namespace gpudiag::hw {

namespace {

/// A decimal field of the header: digits only, at most 20 of them.
bool kmsg_decimal(std::string_view s, std::uint64_t& out) {
  if (s.empty() || s.size() > 20) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

/// Closes the descriptor however the scan ends.
struct KmsgFd {
  int fd;
  ~KmsgFd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

bool parse_kmsg_line(std::string_view line, KmsgRecord& out, std::size_t max_record) {
  bool cut = false;
  if (line.size() > max_record) {
    line = line.substr(0, max_record);
    cut = true;
  }
  const auto semi = line.find(';');
  if (semi == std::string_view::npos || semi > 128) return false;
  const std::string_view header = line.substr(0, semi);
  std::uint64_t fields[3] = {0, 0, 0};
  std::size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const auto comma = header.find(',', at);
    if (comma == std::string_view::npos) return false;  // FLAGS must follow USEC
    if (!kmsg_decimal(header.substr(at, comma - at), fields[i])) return false;
    at = comma + 1;
  }
  if (fields[0] > 0xffff) return false;
  out.level = static_cast<int>(fields[0] & 7);
  out.facility = static_cast<int>(fields[0] >> 3);
  out.seq = fields[1];
  out.usec = fields[2];
  out.message = clean_text(line.substr(semi + 1));
  out.cut = cut;
  return true;
}

std::string kmsg_error_text(const std::string& path, int err) {
  std::string why;
  if (err == EACCES || err == EPERM)
    why = "permission denied; run as root or set kernel.dmesg_restrict=0";
  else
    why = std::strerror(err);
  return "cannot read the kernel log (" + clean_text(path) + "): " + why;
}

KmsgScan scan_kernel_log(const std::string& path,
                         const std::function<void(const KmsgRecord&)>& visit,
                         const KmsgLimits& limits) {
  KmsgScan scan;
  KmsgFd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    scan.error = kmsg_error_text(path, errno);
    return scan;
  }
  std::string line;        // the record being assembled, at most max_record + 1 bytes
  bool in_line = false;    // bytes of an unfinished line were seen
  KmsgRecord rec;
  auto finish_line = [&] {
    if (!line.empty() && line[0] != ' ') {  // a continuation line holds KEY=VALUE
      if (parse_kmsg_line(line, rec, limits.max_record)) {
        ++scan.records;
        visit(rec);
      } else {
        ++scan.malformed;
      }
    }
    line.clear();
    in_line = false;
  };
  // The device needs a buffer as long as its longest record (8 KiB and its
  // dictionary); a file is read in larger gulps.
  std::vector<char> buf(64 * 1024);
  std::size_t total = 0;
  while (true) {
    const ssize_t r = ::read(f.fd, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE) {  // overwritten before we read it: the next one follows
        if (++scan.overwritten > (1u << 20)) break;
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) scan.error = kmsg_error_text(path, errno);
      break;
    }
    if (r == 0) break;
    const char* p = buf.data();
    const char* end = p + r;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      const char* stop = nl ? nl : end;
      const std::size_t room = limits.max_record + 1 > line.size() ? limits.max_record + 1 - line.size() : 0;
      line.append(p, std::min(room, static_cast<std::size_t>(stop - p)));
      in_line = true;
      if (!nl) break;
      finish_line();
      p = nl + 1;
    }
    total += static_cast<std::size_t>(r);
    if (total >= limits.max_read_bytes) {
      scan.stopped_at_limit = true;
      break;
    }
  }
  if (in_line && !scan.stopped_at_limit && scan.error.empty()) scan.partial_tail = true;
  return scan;
}

KernelLog read_kernel_log(const std::string& path, const KmsgLimits& limits) {
  KernelLog log;
  std::deque<KmsgRecord> kept;
  std::size_t bytes = 0;
  log.scan = scan_kernel_log(
      path,
      [&](const KmsgRecord& r) {
        kept.push_back(r);
        bytes += r.message.size();
        while (!kept.empty() && (kept.size() > limits.max_records || bytes > limits.max_kept_bytes)) {
          bytes -= kept.front().message.size();
          kept.pop_front();
          ++log.dropped;
        }
      },
      limits);
  log.records.assign(std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
  return log;
}

}  // namespace gpudiag::hw
