// The bounded line splitter (NUL blocks, binary runs, over-long lines, the input cap, line
// numbers) and the path walk (symlink loops, files reached twice, FIFOs and devices).
#include "nccl_log/reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nccl_log/job.h"
#include "util/error.h"

namespace gpudiag::nccl_log {
namespace {

struct Got {
  std::string text;
  std::size_t lineno;
  bool whole;
  bool operator==(const Got&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Got& g) {
  return os << "{'" << g.text << "', " << g.lineno << ", " << g.whole << "}";
}

std::vector<Got> split_all(const std::string& bytes, InputLimits limits = {},
                           std::size_t* junk = nullptr, std::size_t* lines = nullptr) {
  std::istringstream in(bytes);
  StreamSource source(in, "t.log");
  LineSplitter splitter(source, "t.log", limits);
  std::vector<Got> out;
  Piece p;
  while (splitter.next(p)) out.push_back({std::string(p.text), p.lineno, p.whole});
  if (junk) *junk = splitter.junk();
  if (lines) *lines = splitter.lines();
  return out;
}

TEST(LineSplitter, SplitsLinesAndNumbersThem) {
  std::size_t junk = 9, lines = 0;
  auto got = split_all("a\n\nb\nlast", {}, &junk, &lines);
  EXPECT_EQ(got,
            (std::vector<Got>{{"a", 1, true}, {"", 2, true}, {"b", 3, true}, {"last", 4, true}}));
  EXPECT_EQ(junk, 0u);
  EXPECT_EQ(lines, 4u);
}

TEST(LineSplitter, ANulBlockGluedToALineLeavesTheLineReadable) {
  const std::string line = "node1:12:12 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE";
  std::size_t junk = 0, lines = 0;
  auto got = split_all("first\n" + std::string(4096, '\0') + line + "\nnext\n", {}, &junk, &lines);
  EXPECT_EQ(got, (std::vector<Got>{{"first", 1, true}, {line, 2, false}, {"next", 3, true}}));
  EXPECT_EQ(junk, 1u);
  EXPECT_EQ(lines, 3u);
}

TEST(LineSplitter, BinaryRunsInsideALineCutItIntoFragments) {
  std::size_t junk = 0;
  auto got = split_all(std::string("abc\0\x01\x02"
                                   "def\x7f\n\x03\n",
                                   13),
                       {}, &junk);
  EXPECT_EQ(got, (std::vector<Got>{{"abc", 1, false}, {"def", 1, false}}));
  EXPECT_EQ(junk, 3u);  // \0\1\2, \x7f, \3
  // Tabs, carriage returns and ANSI colour escapes are text.
  got = split_all("\x1b[31mred\x1b[0m\tx\r\n");
  EXPECT_EQ(got, (std::vector<Got>{{"\x1b[31mred\x1b[0m\tx\r", 1, true}}));
}

TEST(LineSplitter, AnOverLongLineIsDroppedWhole) {
  InputLimits limits;
  limits.max_line = 10;
  std::size_t junk = 0, lines = 0;
  auto got = split_all("short\n" + std::string(100, 'x') + "\nnext\n" + std::string(11, 'y'),
                       limits, &junk, &lines);
  EXPECT_EQ(got, (std::vector<Got>{{"short", 1, true}, {"next", 3, true}}));
  EXPECT_EQ(junk, 2u);
  EXPECT_EQ(lines, 4u);
}

TEST(JobBuilder, BinaryAndOverLongLinesAreOtherLinesToo) {
  InputLimits limits;
  limits.max_line = 100;
  JobBuilder b(limits);
  std::istringstream in(std::string("h:1:1 [0] NCCL INFO a\n\x01\x02\n") + std::string(200, 'x') +
                        "\ntext\x01more\n" + "h:1:1 [0] NCCL INFO b\x01\n\n");
  b.add_stream(in, "a.log");
  Job job = b.finish();
  EXPECT_EQ(job.nccl_lines, 2u);
  EXPECT_EQ(job.other_lines, 3u);  // the binary line, the long line, "text\x01more"
  EXPECT_EQ(job.junk_lines, 4u);
  EXPECT_EQ(job.files.at(0).lines, 6u);
}

TEST(LineSplitter, AHugeLineAcrossManyBlocksIsOneJunk) {
  std::size_t junk = 0;
  auto got = split_all(std::string(3 << 20, 'z') + "\nok\n", {}, &junk);
  EXPECT_EQ(got, (std::vector<Got>{{"ok", 2, true}}));
  EXPECT_EQ(junk, 1u);
}

TEST(LineSplitter, StopsAtTheInputCap) {
  InputLimits limits;
  limits.max_bytes = 1000;
  try {
    split_all(std::string(5000, '\0'), limits);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1000 B of input (--max-input); stopped "
                                         "reading 't.log'"),
              std::string::npos)
        << e.what();
  }
}

TEST(JobBuilder, ANulBlockDoesNotMakeAHealthyLogLookBroken) {
  std::string log =
      "node1:12:12 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId 1000 - Init START\n"
      "node1:12:12 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId 1000 - Init COMPLETE\n";
  std::string damaged =
      log.substr(0, log.find('\n') + 1) + std::string(4096, '\0') + log.substr(log.find('\n') + 1);
  JobBuilder b;
  std::istringstream in(damaged);
  b.add_stream(in, "a.log");
  Job job = b.finish();
  ASSERT_EQ(job.processes.size(), 1u);
  EXPECT_TRUE(job.processes[0].init_complete());
  EXPECT_EQ(job.processes[0].last_line.line, 2u);
  EXPECT_EQ(job.other_lines, 0u);
  EXPECT_EQ(job.junk_lines, 1u);
  EXPECT_EQ(job.files.at(0).lines, 2u);
}

TEST(JobBuilder, StopsAtTheProcessCap) {
  InputLimits limits;
  limits.max_processes = 3;
  JobBuilder b(limits);
  std::istringstream ok(
      "h:1:1 [0] NCCL INFO a\nh:2:2 [0] NCCL INFO a\nh:3:3 [0] NCCL INFO a\n"
      "h:1:1 [0] NCCL INFO again\n");
  b.add_stream(ok, "a.log");
  std::istringstream more("h:4:4 [0] NCCL INFO a\n");
  try {
    b.add_stream(more, "b.log");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "more than 3 processes (host:pid) in these logs, more than any job gpudiag checks; "
              "stopped at 'b.log'");
  }
}

class Paths : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpudiag-reader-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text = "x\n") {
    auto p = dir_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string error_of(const std::vector<std::string>& paths) {
    try {
      list_logs(paths);
    } catch (const UsageError& e) {
      return e.one_line();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(Paths, ASymlinkLoopIsReadOnce) {
  const auto a = file("run/a.log");
  const auto b = file("run/sub/b.log");
  std::filesystem::create_directory_symlink(dir_ / "run", dir_ / "run/sub/up");  // a cycle
  std::filesystem::create_directory_symlink(dir_ / "run/sub", dir_ / "run/again");
  std::filesystem::create_symlink(dir_ / "run/a.log", dir_ / "run/sub/a-link.log");
  std::filesystem::create_symlink(dir_ / "run/self", dir_ / "run/self");  // ELOOP itself
  EXPECT_EQ(list_logs({(dir_ / "run").string()}), (std::vector<std::string>{a, b}));
  // The same file given twice, or inside a directory also given, is read once.
  EXPECT_EQ(list_logs({a, (dir_ / "run").string(), a}), (std::vector<std::string>{a, b}));
}

TEST_F(Paths, FifosAndDevicesAreRefusedByName) {
  const auto fifo = (dir_ / "nccl.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of({fifo}).rfind("'" + fifo +
                                       "' is a FIFO (named pipe), not a regular file; "
                                       "try: pass log files or directories; to read a pipe",
                                   0),
            0u)
      << error_of({fifo});
  EXPECT_EQ(error_of({"/dev/zero"}).rfind("'/dev/zero' is a character device, not a regular", 0),
            0u);
  // Inside a directory they are skipped; the regular files are read.
  const auto log = file("nccl.log");
  EXPECT_EQ(list_logs({dir_.string()}), (std::vector<std::string>{log}));
  // What a shell hands over is read: - and /dev/stdin.
  EXPECT_EQ(list_logs({"-"}), (std::vector<std::string>{"<stdin>"}));
  EXPECT_EQ(error_of({"/dev/stdin"}), "");
}

TEST_F(Paths, OpenNeverBlocksOnAFifo) {
  const auto fifo = (dir_ / "swapped.log").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    open_log(fifo);  // as if list_logs had seen a regular file there
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("is a FIFO (named pipe)"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpudiag::nccl_log
