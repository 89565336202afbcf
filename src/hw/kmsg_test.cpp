// The kernel-log reader against files in /dev/kmsg's format (many records
// per read, split at newlines) and, where readable, the machine's own
// /dev/kmsg (one record per read): records, continuation lines, hostile
// bytes, cut and truncated records, limits, and the permission message.
#include "hw/kmsg.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

namespace gpudiag::hw {
namespace {

std::string hw_kmsg_temp_file(const std::string& text) {
  static int n = 0;
  const auto p = std::filesystem::temp_directory_path() /
                 ("gpudiag-kmsg-" + std::to_string(getpid()) + "-" + std::to_string(n++));
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::vector<KmsgRecord> hw_kmsg_read_all(const std::string& path, KmsgScan* scan = nullptr,
                                         const KmsgLimits& limits = {}) {
  std::vector<KmsgRecord> out;
  const auto s = scan_kernel_log(path, [&](const KmsgRecord& r) { out.push_back(r); }, limits);
  if (scan) *scan = s;
  std::filesystem::remove(path);
  return out;
}

TEST(HwKmsg, ParsesTheHeaderAndTheMessage) {
  KmsgRecord r;
  ASSERT_TRUE(parse_kmsg_line("4,812,5123456,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", r));
  EXPECT_EQ(r.level, 4);
  EXPECT_EQ(r.facility, 0);
  EXPECT_EQ(r.seq, 812u);
  EXPECT_EQ(r.usec, 5123456u);
  EXPECT_EQ(r.message, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  ASSERT_TRUE(parse_kmsg_line("30,1,2,c,more;systemd[1]: started", r));  // facility 3, extra header fields
  EXPECT_EQ(r.facility, 3);
  EXPECT_EQ(r.level, 6);
  for (const char* bad : {"", "no header", "4,1;x", "4,1,2;x", "a,1,2,-;x", "4,1,99999999999999999999999,-;x",
                          "4,-1,2,-;x", "999999,1,2,-;x"})
    EXPECT_FALSE(parse_kmsg_line(bad, r)) << bad;
}

TEST(HwKmsg, ReadsManyRecordsPerReadAndSkipsContinuationLines) {
  const std::string text =
      "6,1,100,-;first\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:3b:00.0\n"
      "4,2,200,-;second\n"
      "garbage without a header\n"
      "\n"
      "3,3,300,-;third\n";
  KmsgScan scan;
  const auto recs = hw_kmsg_read_all(hw_kmsg_temp_file(text), &scan);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].message, "first");
  EXPECT_EQ(recs[1].message, "second");
  EXPECT_EQ(recs[2].usec, 300u);
  EXPECT_EQ(scan.records, 3u);
  EXPECT_EQ(scan.malformed, 1u);
  EXPECT_TRUE(scan.error.empty());
  EXPECT_FALSE(scan.partial_tail);
}

TEST(HwKmsg, HostileBytesAreEscapedHugeLinesCutTruncatedTailDropped) {
  std::string text = "4,1,1,-;bell\x07 esc\x1b[31mred \xff\xfe bidi\xe2\x80\xae end\n";
  text += "4,2,2,-;" + std::string(100000, 'A') + "\n";       // far past 8 KiB
  text += "4,3,3,-;nul";
  text.push_back('\0');
  text += "inside\n";
  text += "4,4,4,-;after the huge one\n";
  text += "4,5,5,-;NVRM: Xid (PCI:0000:3b:00): 7";              // the source ends mid-record
  KmsgScan scan;
  const auto recs = hw_kmsg_read_all(hw_kmsg_temp_file(text), &scan);
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0].message.find('\x1b'), std::string::npos);
  EXPECT_NE(recs[0].message.find("\\x1b"), std::string::npos);
  EXPECT_NE(recs[0].message.find("\\xff"), std::string::npos);
  EXPECT_NE(recs[0].message.find("\\u202e"), std::string::npos);
  EXPECT_TRUE(recs[1].cut);
  EXPECT_LE(recs[1].message.size(), 8192u);
  EXPECT_NE(recs[2].message.find("\\x00"), std::string::npos);
  EXPECT_EQ(recs[3].message, "after the huge one");
  EXPECT_TRUE(scan.partial_tail);  // the cut Xid line is not read as Xid 7
}

TEST(HwKmsg, KeepsTheNewestRecordsWithinItsLimits) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += "6," + std::to_string(i) + "," + std::to_string(i * 10) + ",-;record " + std::to_string(i) + "\n";
  const std::string path = hw_kmsg_temp_file(text);
  KmsgLimits limits;
  limits.max_records = 3;
  const auto log = read_kernel_log(path, limits);
  std::filesystem::remove(path);
  ASSERT_EQ(log.records.size(), 3u);
  EXPECT_EQ(log.records.front().message, "record 7");
  EXPECT_EQ(log.dropped, 7u);
  KmsgLimits small;
  small.max_read_bytes = 40;  // stops after the first read that reaches it
  KmsgScan scan;
  hw_kmsg_read_all(hw_kmsg_temp_file(text + std::string(1 << 17, 'x') + "\n"), &scan, small);
  EXPECT_TRUE(scan.stopped_at_limit);
}

TEST(HwKmsg, SaysWhyASourceCannotBeRead) {
  EXPECT_EQ(kmsg_error_text("/dev/kmsg", EPERM),
            "cannot read the kernel log (/dev/kmsg): permission denied; run as root or set "
            "kernel.dmesg_restrict=0");
  EXPECT_EQ(kmsg_error_text("/dev/kmsg", EACCES), kmsg_error_text("/dev/kmsg", EPERM));
  const auto scan = scan_kernel_log("/nonexistent/kmsg", [](const KmsgRecord&) {});
  EXPECT_NE(scan.error.find("cannot read the kernel log (/nonexistent/kmsg)"), std::string::npos);
}

TEST(HwKmsg, ReadsThisMachinesLogWithoutBlocking) {
  // The device gives one record per read and EAGAIN at the end: the scan
  // returns (a blocking read would hang this test) with records or a reason.
  const auto scan = scan_kernel_log("/dev/kmsg", [](const KmsgRecord&) {});
  if (!scan.error.empty()) GTEST_SKIP() << scan.error;
  EXPECT_GT(scan.records, 0u);
  EXPECT_EQ(scan.malformed, 0u);
  EXPECT_FALSE(scan.partial_tail);
}

}  // namespace
}  // namespace gpudiag::hw
