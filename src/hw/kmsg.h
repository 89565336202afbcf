// The kernel log as /dev/kmsg serves it (Documentation/ABI/testing/dev-kmsg):
// one record per line, `PRI,SEQ,USEC,FLAGS[,...];MESSAGE\n`, where PRI is
// facility * 8 + level, SEQ the record's sequence number and USEC its time in
// microseconds since boot; continuation lines that start with a space carry
// KEY=VALUE pairs and are skipped here. The device hands out one record per
// read() and EPIPE when the record asked for was overwritten; a regular file
// in the same format (what tests bind-mount over /dev/kmsg) hands out many
// records per read, so the reader splits at newlines either way.
//
// Everything read is a stranger's bytes: records are cut at
// KmsgLimits::max_record bytes, messages escaped (util/text.h), and what is
// kept and read bounded; a source that cannot be read is one line saying why,
// never an exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::hw {

struct KmsgRecord {
  int level = 6;          ///< PRI & 7: 0 emerg .. 7 debug
  int facility = 0;       ///< PRI >> 3: 0 kernel, others from user space
  std::uint64_t seq = 0;
  std::uint64_t usec = 0; ///< since boot
  std::string message;    ///< escaped, one line
  bool cut = false;       ///< longer than max_record: the rest was dropped
};

struct KmsgLimits {
  std::size_t max_records = 65536;   ///< kept by read_kernel_log (the newest)
  std::size_t max_kept_bytes = 4u << 20;
  std::size_t max_record = 8192;     ///< a longer line is cut here
  std::size_t max_read_bytes = 64u << 20;  ///< then reading stops
};

struct KmsgScan {
  std::string error;             ///< "" when read; else the one line callers show
  std::uint64_t records = 0;     ///< well-formed records seen
  std::uint64_t malformed = 0;   ///< lines without a valid header
  std::uint64_t overwritten = 0; ///< EPIPE: records lost to the ring buffer
  bool stopped_at_limit = false; ///< max_read_bytes reached
  bool partial_tail = false;     ///< the source ended inside a record (dropped)
};

/// Parses one line (without its newline): false when the header is not
/// `digits,digits,digits,...;`. The message is escaped and cut as configured.
bool parse_kmsg_line(std::string_view line, KmsgRecord& out, std::size_t max_record = 8192);

/// Reads `path` without blocking until its end (EAGAIN for the device, end
/// of file for a file) and calls `visit` for each record in order.
KmsgScan scan_kernel_log(const std::string& path, const std::function<void(const KmsgRecord&)>& visit,
                         const KmsgLimits& limits = {});

struct KernelLog {
  KmsgScan scan;
  std::vector<KmsgRecord> records;  ///< the newest that fit the limits, oldest first
  std::uint64_t dropped = 0;        ///< older records not kept
};

/// scan_kernel_log, keeping the records.
KernelLog read_kernel_log(const std::string& path = "/dev/kmsg", const KmsgLimits& limits = {});

/// The one-line reason for an open() or read() error on `path`.
std::string kmsg_error_text(const std::string& path, int err);

}  // namespace gpudiag::hw
