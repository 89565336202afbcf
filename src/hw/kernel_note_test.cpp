// The kernel log near a failure (kernel_note.h), from a file in /dev/kmsg's
// format: what was logged within the window is quoted with its class (the
// node's findings first), the dead rank's OOM-kill line with it; what came
// before the job or long before the failure, informational lines, virtual
// interfaces and other processes' OOM kills are not; a healthy log quotes
// nothing, and hostile lines are cut.
#include "hw/kernel_note.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpudiag::hw {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kSec = 1'000'000;

struct NoteLog {
  fs::path path = fs::temp_directory_path() / ("gpudiag-note-" + std::to_string(getpid()) + ".txt");
  int seq = 0;
  ~NoteLog() { fs::remove(path); }
  void add(std::uint64_t usec, const std::string& message, int pri = 3) {
    std::ofstream(path, std::ios::app) << pri << "," << seq++ << "," << usec << ",-;" << message << "\n";
  }
};

KernelNoteWindow window(std::uint64_t at_s, std::uint64_t start_s, pid_t pid) {
  KernelNoteWindow w;
  w.at_usec = at_s * kSec;
  w.job_start_usec = start_s * kSec;
  w.pid = pid;
  return w;
}

TEST(HwKernelNote, QuotesTheWindowsFindingsAndTheDeadRanksOomKill) {
  NoteLog log;
  log.add(10 * kSec, "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, An uncorrectable double bit error");  // before the job
  log.add(500 * kSec, "NVRM: Xid (PCI:0000:3b:00): 63, pid=1, name=x, row remapping");  // in the job, long before
  log.add(950 * kSec, "NVRM: Xid (PCI:0000:3b:00): 43, pid=4242, name=python3, Ch 00000008", 4);
  log.add(960 * kSec, "EDAC MC: Ver: 3.0.0", 6);
  log.add(970 * kSec, "veth3f2a1b0: Link is Down", 6);
  log.add(975 * kSec, "Out of memory: Killed process 5151 (python3) total-vm:1kB", 3);  // another process
  log.add(980 * kSec, "Out of memory: Killed process 4242 (python3) total-vm:81234567kB, anon-rss:8000000kB", 3);
  log.add(990 * kSec, "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.");
  const auto n = kernel_note(window(1000, 100, 4242), log.path.string());
  EXPECT_EQ(n.error, "");
  ASSERT_EQ(n.lines.size(), 3u) << n.lines.front();
  EXPECT_EQ(n.lines[0].rfind("OOM killer: Out of memory: Killed process 4242 (python3)", 0), 0u);
  EXPECT_EQ(n.lines[1].rfind("node: Xid 79 (GPU fallen off the bus) on 0000:3b:00 at ", 0), 0u) << n.lines[1];
  EXPECT_NE(n.lines[1].find(": reboot the node"), std::string::npos);
  EXPECT_EQ(n.lines[2].rfind("workload (the application's fault): Xid 43", 0), 0u) << n.lines[2];
  const auto text = kernel_note_text(n, "node7", true);
  EXPECT_EQ(text.rfind("the kernel log of node7 within a minute before it:\n  OOM killer: ", 0), 0u) << text;
  // The job's start bounds the window too.
  EXPECT_EQ(kernel_note(window(1000, 985, 4242), log.path.string()).lines.size(), 1u);
}

TEST(HwKernelNote, AHealthyLogQuotesNothing) {
  NoteLog log;
  log.add(950 * kSec, "EDAC MC: Ver: 3.0.0", 6);
  log.add(951 * kSec, "nvidia-nvlink: Nvlink Core is being initialized, major device number 511", 6);
  log.add(960 * kSec, "pcieport 0000:00:01.0: AER: enabled with IRQ 121", 6);
  log.add(970 * kSec, "br-5a1c2e: port 1(veth3f2a1b0) entered disabled state", 6);
  log.add(980 * kSec, "docker0: Link is Down", 6);
  const auto n = kernel_note(window(1000, 0, 4242), log.path.string());
  EXPECT_TRUE(n.lines.empty()) << n.lines.front();
  EXPECT_EQ(kernel_note_text(n, "node7", true), "");
  EXPECT_EQ(kernel_note_text(n, "node7", false),
            "the kernel log of node7 shows no hardware error and no OOM kill within a minute before it");
  const auto missing = kernel_note(window(1000, 0, 1), "/nonexistent/kmsg");
  EXPECT_NE(missing.error, "");
  EXPECT_EQ(kernel_note_text(missing, "node7", false), missing.error);
}

TEST(HwKernelNote, HostileLinesAreCutAndCounted) {
  NoteLog log;
  for (int i = 0; i < 20; ++i)
    log.add(990 * kSec + i, "NVRM: Xid (PCI:0000:" + std::to_string(10 + i) + ":00): 79, pid=1, name=" +
                                std::string(5000, 'A') + "\x1b[2J, GPU has fallen off the bus.");
  const auto n = kernel_note(window(1000, 0, 0), log.path.string());
  ASSERT_EQ(n.lines.size(), 9u);
  EXPECT_EQ(n.lines.back(), "12 more (gpudiag info lists the node's findings)");
  for (const auto& l : n.lines) {
    EXPECT_LE(l.size(), 320u);
    EXPECT_EQ(l.find('\x1b'), std::string::npos);
  }
}

}  // namespace
}  // namespace gpudiag::hw
