// Which files are read as NCCL logs: gpudiag's own reports never, binary files and files
// without an NCCL line not when found in a directory; quotes of log lines in a report are
// not log lines. The directory tests write nccl-log's real text and JSON reports beside the
// logs they came from and check that reading the directory again finds the same.
#include "nccl_log/sniff.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "nccl_log/render.h"

namespace gpudiag::nccl_log {
namespace {

namespace fs = std::filesystem;

TEST(NcclLogSniff, LogsAreLogs) {
  EXPECT_EQ(judge_head("h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"),
            FileVerdict::log);
  EXPECT_EQ(judge_head("[default2]:h:1:1 [0] NCCL INFO Using network IB\n"), FileVerdict::log);
  EXPECT_EQ(judge_head("Traceback (most recent call last):\n"),
            FileVerdict::log);  // read, then judged
  EXPECT_EQ(judge_head(""), FileVerdict::log);
  // A zero-filled head (a crashed node's log) is junk the splitter reads past, not a binary file.
  EXPECT_EQ(judge_head(std::string(8192, '\0') + "h:1:1 [0] NCCL INFO Using network IB\n"),
            FileVerdict::log);
  // Docker's json-file driver wraps each log line in a JSON object: not gpudiag's.
  EXPECT_EQ(
      judge_head("{\"log\":\"h:1:1 [0] NCCL INFO Using network IB\\n\",\"stream\":\"stderr\"}\n"),
      FileVerdict::log);
}

TEST(NcclLogSniff, GpudiagReportsAreRecognised) {
  EXPECT_EQ(judge_head("NCCL logs: 3 processes on 3 hosts (a, b, c); 3 files, 51 NCCL lines\n"),
            FileVerdict::gpudiag_report);
  EXPECT_EQ(judge_head("\n[rank0]: NCCL logs: 1 process on 1 host (a); 1 file, 5 NCCL lines\n"),
            FileVerdict::gpudiag_report);
  EXPECT_EQ(judge_head("{\n  \"files\": [],\n  \"skipped_files\": [],\n  \"hosts\": [],\n"
                       "  \"multi_node\": false,\n  \"nccl_lines\": 3,\n  \"processes\": ["),
            FileVerdict::gpudiag_report);
  // A report of many files: only its "files" list fits in the head.
  std::string many = "{\n  \"files\": [\n";
  while (many.size() < 70000)
    many +=
        "    {\"path\": \"run/nccl.rank1.node1.4242.log\", \"lines\": 120, \"nccl_lines\": 96},\n";
  EXPECT_EQ(judge_head(std::string_view(many).substr(0, 65536)), FileVerdict::gpudiag_report);
  // Saved with its stderr in front (`gpudiag nccl-log run 2>&1 > report.txt`).
  EXPECT_EQ(judge_head("gpudiag warning: nccl-log: skipped 1 of 3 files, not NCCL logs: 'x'\n"
                       "NCCL logs: 2 processes on 2 hosts (a, b); 2 files, 9 NCCL lines\n"),
            FileVerdict::gpudiag_report);
  EXPECT_EQ(judge_head("{\"schema\": \"gpudiag-nccl-log/1\", \"files\": []}"),
            FileVerdict::gpudiag_report);
  EXPECT_EQ(judge_head("{\n  \"gpudiag\": \"0.1.0\",\n  \"ok\": true\n}\n"),
            FileVerdict::gpudiag_report);
}

TEST(NcclLogSniff, BinaryFilesAreRecognised) {
  std::string safetensors("\x58\x02\0\0\0\0\0\0{\"w\":{\"dtype\":\"F32\"}}", 28);
  EXPECT_EQ(judge_head(safetensors), FileVerdict::binary);
  EXPECT_EQ(judge_head(std::string("\x1f\x8b\x08\0\0\0\0\0\0\x03", 10)), FileVerdict::binary);
  // Binary bytes around real lines: still a log (the splitter keeps the readable lines).
  EXPECT_EQ(judge_head(std::string("\x01\x02\0\0\nh:1:1 [0] NCCL INFO Using network IB\n", 44)),
            FileVerdict::log);
}

TEST(NcclLogSniff, QuotesOfLogLinesInATextReport) {
  EXPECT_TRUE(
      is_gpudiag_quote("  log:  run/nccl.a.1.log:12: a:1:1 [0] NCCL INFO Using network IB"));
  EXPECT_TRUE(is_gpudiag_quote("[rank0]:   log:  /x/y.log:3: [default2]:a:1:1 [0] NCCL WARN x"));
  EXPECT_FALSE(is_gpudiag_quote("a:1:1 [0] NCCL INFO Using network IB"));
  EXPECT_FALSE(is_gpudiag_quote("a:1:1 [0] NCCL INFO  log:  something: else"));
}

class NcclLogRunDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpudiag-sniff-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // torchrun --tee prefixes: a report quoting these lines invented hosts "[default2]:a".
    write("nccl.a.1.log",
          "[default0]:a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
          "[default0]:a:1:1 [0] NCCL INFO Using network IB\n"
          "[default0]:a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init "
          "COMPLETE\n");
    write("nccl.b.2.log",
          "[default1]:b:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
          "[default1]:b:2:2 [0] NCCL INFO Using network Socket\n"
          "[default1]:b:2:2 [0] misc/socket.cc:1 NCCL WARN something failed\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  Report read() { return summarize({dir_.string()}); }
  static std::vector<std::string> ids(const Report& r) {
    std::vector<std::string> out;
    for (const auto& f : r.findings) out.push_back(f.id + ": " + f.title);
    return out;
  }
  fs::path dir_;
};

TEST_F(NcclLogRunDir, OwnReportsAndOtherFilesChangeNothing) {
  const Report before = read();
  ASSERT_EQ(before.job.processes.size(), 2u);
  write("report.txt", render_text(before));
  write("report.json", render_json(before).dump(2) + "\n");
  // `gpudiag check --nccl-debug` output: short, the report's header is near the top; long
  // (many ranks), only its quotes of log lines tell it apart.
  const std::string appended = "NCCL logs in " + dir_.string() +
                               " (gpudiag nccl-log DIR reads them again):\n" + render_text(before);
  write("check-1.out", "[a-0] is OK (global rank: 0/1)\n\n" + appended);
  std::string many;
  for (int r = 0; r < 8; ++r)
    many += "[a-" + std::to_string(r) + "] is OK (global rank: " + std::to_string(r) + "/8)\n";
  write("check-8.out", many + "\n" + appended);
  write("notes.txt", "rerun after fixing the switch\n");
  write("weights.bin", std::string("\x58\x02\0\0\0\0\0\0{}", 10));
  const Report after = read();
  EXPECT_EQ(ids(after), ids(before));
  EXPECT_EQ(after.job.hosts(), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(after.job.processes.size(), 2u);
  EXPECT_EQ(after.job.files.size(), 2u);
  EXPECT_EQ(after.job.other_lines, before.job.other_lines);
  std::map<std::string, std::string> skipped;
  for (const auto& s : after.job.skipped) skipped[fs::path(s.path).filename().string()] = s.why;
  EXPECT_EQ(skipped, (std::map<std::string, std::string>{{"check-1.out", "a gpudiag report"},
                                                         {"check-8.out", "no NCCL line"},
                                                         {"notes.txt", "no NCCL line"},
                                                         {"report.json", "a gpudiag report"},
                                                         {"report.txt", "a gpudiag report"},
                                                         {"weights.bin", "binary data"}}));
}

TEST_F(NcclLogRunDir, AReportNamedDirectlyIsNotReadEither) {
  write("report.json", render_json(read()).dump(2) + "\n");
  const Report r = summarize({(dir_ / "nccl.a.1.log").string(), (dir_ / "report.json").string()});
  EXPECT_EQ(r.job.processes.size(), 1u);
  ASSERT_EQ(r.job.skipped.size(), 1u);
  EXPECT_EQ(r.job.skipped[0].why, "a gpudiag report");
}

}  // namespace
}  // namespace gpudiag::nccl_log
