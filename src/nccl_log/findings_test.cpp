// Rule behaviour that needs a job shaped just so: when a rule must stay quiet, how ranks that
// disagree are named, and how the first WARN is chosen. Every finding also has an end-to-end
// test on a real log in tests/integration/test_nccl_log.py.
#include "nccl_log/findings.h"

#include <gtest/gtest.h>

#include <sstream>

namespace gpudiag::nccl_log {
namespace {

Job build(std::initializer_list<std::pair<const char*, const char*>> files) {
  JobBuilder b;
  for (const auto& [name, text] : files) {
    std::istringstream in(text);
    b.add_stream(in, name);
  }
  return b.finish();
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const auto& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

TEST(NcclLogFindings, LoopbackOnOneHostIsNotAProblem) {
  auto one = find_problems(build({{"a.log",
                                   "h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
                                   "h:2:2 [1] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"}}));
  EXPECT_EQ(find(one, "loopback-interface"), nullptr);
  auto two = find_problems(build({{"a.log",
                                   "h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
                                   "g:2:2 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"}}));
  const Finding* f = find(two, "loopback-interface");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->who, (std::vector<std::string>{"h:1"}));
  EXPECT_NE(f->remedy.find("NCCL_SOCKET_IFNAME"), std::string::npos);
}

TEST(NcclLogFindings, VersionMismatchNamesTheOddRankOut) {
  auto fs = find_problems(build({
      {"r0.log",
       "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n"
       "a:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n"},
      {"r1.log",
       "a:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 3 cudaDev 1 busId 2000 - Init COMPLETE\n"
       "a:2:2 [1] NCCL INFO NCCL version 2.19.3+cuda12.3\n"},
      {"r2.log",
       "b:3:3 [0] NCCL INFO comm 0x3 rank 2 nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n"
       "b:3:3 [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n"},
  }));
  const Finding* f = find(fs, "version-mismatch");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->who, (std::vector<std::string>{"rank 2 (b:3)"}));
  EXPECT_NE(f->title.find("2.18.5 on rank 2 (b:3)"), std::string::npos) << f->title;
  EXPECT_EQ(f->evidence.at(0).file, "r2.log");
  EXPECT_EQ(find(fs, "init-incomplete"), nullptr);
  EXPECT_TRUE(has_problem(fs));
}

TEST(NcclLogFindings, SameCudaSuffixDifferenceIsNotAVersionMismatch) {
  auto fs = find_problems(build({{"a.log",
                                  "a:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda11.8\n"
                                  "b:2:2 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n"}}));
  EXPECT_EQ(find(fs, "version-mismatch"), nullptr);
}

TEST(NcclLogFindings, FirstWarnUsesTimestampsAcrossFiles) {
  auto fs = find_problems(build({
      {"a.log", "[2026-11-22 09:30:18.505277] vm:1:1 [0] init.cc:2053 NCCL WARN later one\n"},
      {"b.log", "[2026-11-22 09:30:18.419379] vm:2:2 [0] init.cc:2053 NCCL WARN earlier one\n"},
  }));
  const Finding* f = find(fs, "first-warn");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("earlier one"), std::string::npos);
  EXPECT_EQ(f->who, (std::vector<std::string>{"vm:2"}));
}

TEST(NcclLogFindings, FirstWarnWithoutTimestampsSaysItUsedFileOrder) {
  auto fs = find_problems(build({
      {"a.log", "vm:1:1 [0] init.cc:1 NCCL WARN in the first file\n"},
      {"b.log", "vm:2:2 [0] init.cc:1 NCCL WARN in the second file\n"},
  }));
  const Finding* f = find(fs, "first-warn");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("in file order"), std::string::npos);
  EXPECT_NE(f->title.find("in the first file"), std::string::npos);
}

TEST(NcclLogFindings, VerbsWarningIsNeverTheFirstWarn) {
  auto fs =
      find_problems(build({{"a.log",
                            "ai:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open "
                            "libibverbs.so[.1]\nai:1:1 [0] NCCL INFO Using network Socket\n"}}));
  EXPECT_EQ(find(fs, "first-warn"), nullptr);
  const Finding* v = find(fs, "verbs-missing");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->severity, Severity::note);  // one node: sockets are never used for data
}

TEST(NcclLogFindings, NotesAloneAreNotProblems) {
  auto fs = find_problems(build({{"a.log",
                                  "n:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId "
                                  "1000 - Init COMPLETE\n"
                                  "n:1:1 [0] NCCL INFO P2P is disabled between connected GPUs 1 "
                                  "and 0. You can repress this message with "
                                  "NCCL_IGNORE_DISABLED_P2P=1.\n"}}));
  ASSERT_NE(find(fs, "p2p-disabled"), nullptr);
  EXPECT_FALSE(has_problem(fs));
}

TEST(NcclLogFindings, ProblemsComeBeforeNotes) {
  auto fs = find_problems(build({{"a.log",
                                  "n:1:1 [0] NCCL INFO P2P is disabled between connected GPUs 1 "
                                  "and 0.\n"
                                  "n:1:1 [0] misc/socket.cc:1 NCCL WARN boom\n"}}));
  ASSERT_GE(fs.size(), 2u);
  EXPECT_EQ(fs.front().severity, Severity::problem);
  EXPECT_EQ(fs.back().severity, Severity::note);
}

}  // namespace
}  // namespace gpudiag::nccl_log
