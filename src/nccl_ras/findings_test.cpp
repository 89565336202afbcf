// The lines gpudiag prints for what RAS found, with and without the launcher's names.
#include "nccl_ras/findings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "nccl_ras/motion.h"

namespace gpudiag::ras {
namespace findings_test {  // named: the unity build puts this folder's tests in one unit

Report fixture(const std::string& name) {
  std::ifstream in(std::string(GPUDIAG_RAS_FIXTURES) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return name.ends_with(".json") ? parse_json(ss.str()) : parse_text(ss.str());
}

/// A report and a second sample of it in which nothing moved.
Report still(const std::string& name) {
  auto r = fixture(name);
  compare_samples(r, fixture(name), 2);
  return r;
}

TEST(RasFindings, Behind) {
  auto lines = finding_lines(still("behind-2.30.7.json"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "mismatch: communicator 5a1e4c0ffee12345 (4 ranks): AllReduce counts differ: ranks 0-2 "
            "issued 120, rank 3 (process 4003 on 127.0.0.1) issued 119; behind: rank 3");
  auto text = finding_lines(still("behind-2.30.7.txt"));
  ASSERT_EQ(text.size(), 1u);
  EXPECT_NE(text[0].find(": 3 ranks issued 120, rank 3 (process 4003 on 127.0.0.1) issued 119"),
            std::string::npos)
      << text[0];
}

TEST(RasFindings, NamesFromTheLauncher) {
  ProcessNamer name = [](const ProcessRef& p) {
    return p.pid == 4003 ? std::string("[node1-1] pid 4003") : std::string();
  };
  auto lines = finding_lines(fixture("dead-2.30.7.json"), name);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0],
            "dead: [node1-1] pid 4003 (GPU 1; rank 3 of communicator 5a1e4c0ffee12345): "
            "RAS cannot reach it over its network");
}

TEST(RasFindings, EveryKindHasItsLine) {
  auto starts = [](const std::vector<std::string>& lines, const std::string& kind) {
    for (const auto& l : lines)
      if (l.starts_with(kind)) return true;
    return false;
  };
  EXPECT_TRUE(starts(finding_lines(fixture("silent-2.26.6.txt")), "unresponsive: process 4002"));
  EXPECT_TRUE(starts(finding_lines(fixture("dead-2.24.3.txt")), "dead: process 4003 on 10.0.0.2"));
  EXPECT_TRUE(starts(finding_lines(fixture("failed-2.28.9.json")),
                     "error: communicator 5a1e4c0ffee12345: rank 1 (process 4001 on 127.0.0.1) "
                     "reported an asynchronous error: Remote process error"));
  EXPECT_TRUE(
      starts(finding_lines(fixture("aborted-2.26.6.txt")),
             "state: communicator 5a1e4c0ffee12345 (4 ranks): ranks are in different states: "
             "3 ranks RUNNING, rank 2 (process 4002 on 127.0.0.1) ABORT"));
  EXPECT_TRUE(finding_lines(fixture("healthy-2.30.7.json")).empty());
  EXPECT_EQ(caveat_lines(fixture("silent-2.30.7.json")).at(0),
            "RAS timed out 1 time while it gathered: its view of the job is partial");
}

TEST(RasFindings, SummaryAndJson) {
  auto r = fixture("many-2.26.6.txt");
  EXPECT_EQ(summary_line(r),
            "NCCL 2.26.6 (text): 16 processes on 2 nodes, 2 communicators, gathered in 0.000 s");
  EXPECT_EQ(summary_line(fixture("many-2.30.7.txt")).substr(62), "gathered in 0.004 s");
  auto j = report_json(r);
  EXPECT_EQ(j["mismatches"].size(), 2u);
  EXPECT_EQ(j["mismatches"][0]["groups"][1]["ranks"].size(), 4u);
}

TEST(RasFindings, MisalignedRowsAreMarkedUnreliable) {
  auto r = fixture("misaligned-2.26.6.txt");
  auto lines = finding_lines(r);
  int marked = 0;
  for (const auto& l : lines) {
    const bool per_comm = !l.starts_with("unresponsive:") && !l.starts_with("dead:");
    EXPECT_EQ(l.ends_with("; unreliable (NCCL before 2.29.2)"), per_comm) << l;
    marked += per_comm;
  }
  EXPECT_EQ(marked, 1);  // the communicator read from the wrong bytes (the world's missing
                         // rank is named on the unresponsive process's line)
  auto notes = caveat_lines(r);
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("wrong bytes (fixed in 2.29.2)") != std::string::npos;
  }));
  for (const auto& l : finding_lines(fixture("misaligned-2.30.7.txt")))
    EXPECT_EQ(l.find("unreliable"), std::string::npos) << l;
}

TEST(RasFindings, StrangersTextIsEscaped) {
  Report r;
  r.dead.push_back({"10.0.0.1\x1b[2J", 7, "0\n1"});
  r.dead_count = 1;
  auto lines = finding_lines(r);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find('\x1b'), std::string::npos);
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::ras
