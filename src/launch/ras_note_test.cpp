// What the launcher prints from NCCL's RAS: its own ranks' names for the processes RAS
// names, another job's answer set aside, and one line when nothing answered.
#include "launch/ras_note.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nccl_ras/motion.h"

namespace gpudiag::launch {
namespace {

Env env_with(const std::string& name, const std::string& value) {
  return Env(std::map<std::string, std::string>{{name, value}});
}

ras::Outcome answered(const std::string& fixture) {
  std::ifstream in(std::string(GPUDIAG_RAS_FIXTURES) + "/" + fixture, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  ras::Outcome o;
  o.answered = true;
  o.endpoint = {"localhost", 28028};
  o.report = fixture.ends_with(".json") ? ras::parse_json(ss.str()) : ras::parse_text(ss.str());
  return o;
}

RasPlan plan() {
  RasPlan p;
  p.timeout_s = 5;
  return p;
}

std::vector<LocalRank> ours() { return {{4000, 0, 0}, {4001, 1, 1}, {4002, 2, 2}, {4003, 3, 3}}; }

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(RasNote, NamesTheRankBehindByTheLaunchersNames) {
  auto o = answered("behind-2.30.7.json");
  ras::compare_samples(o.report, answered("behind-2.30.7.json").report, 2);  // nothing moved
  auto text = joined(ras_note_lines(o, plan(), ours(), "node0", "--hang-timeout 5 s"));
  EXPECT_NE(text.find("NCCL RAS at localhost:28028 (the default; --hang-timeout 5 s): NCCL 2.30.7 "
                      "(json): 4 processes on 1 node"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  mismatch: communicator 5a1e4c0ffee12345 (4 ranks): AllReduce counts "
                      "differ: ranks 0-2 issued 120, rank 3 (rank 3 [node0-3] pid 4003) issued "
                      "119; behind: rank 3\n"),
            std::string::npos)
      << text;
}

TEST(RasNote, SilentAndDeadProcessesAreThisNodesRanks) {
  auto text = joined(ras_note_lines(answered("silent-2.28.9.json"), plan(), ours(), "node0", "x"));
  EXPECT_NE(text.find("  unresponsive: rank 2 [node0-2] pid 4002 (GPU 2; rank 2 of communicator "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("note: RAS timed out 1 time"), std::string::npos) << text;
}

TEST(RasNote, NothingWrongIsSaidOnlyOfWhatRasSaw) {
  auto text = joined(ras_note_lines(answered("healthy-2.30.7.json"), plan(), ours(), "node0", "x"));
  EXPECT_NE(text.find("RAS saw nothing wrong: every process it knows answered"), std::string::npos);
  EXPECT_EQ(text.find("note: RAS names no process"), std::string::npos) << text;
  // The text form names no process when all is well: whose job it is cannot be told.
  text = joined(ras_note_lines(answered("healthy-2.26.6.txt"), plan(), ours(), "node0", "x"));
  EXPECT_NE(text.find("note: RAS names no process of this node"), std::string::npos) << text;
}

TEST(RasNote, AnotherJobsAnswerIsNotUsed) {
  std::vector<LocalRank> strangers{{999991, 0, 0}, {999992, 1, 1}};
  auto lines = ras_note_lines(answered("behind-2.30.7.json"), plan(), strangers, "node0", "x");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("none is a rank of this job"), std::string::npos) << lines[1];
}

TEST(RasNote, NoAnswerIsOneLineThatClaimsNothing) {
  ras::Outcome o;
  o.endpoint = {"localhost", 28028};
  o.refused = true;
  o.error = "nothing answered at localhost:28028 (127.0.0.1:28028: Connection refused)";
  auto lines = ras_note_lines(o, plan(), ours(), "node0", "--hang-timeout 5 s");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("nothing listens there"), std::string::npos);
  EXPECT_NE(lines[0].find("nothing is known from it"), std::string::npos);
  o.refused = false;
  o.error = "every connection to localhost:28028 (3) was accepted and never answered";
  lines = ras_note_lines(o, plan(), ours(), "node0", "x");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("no answer: every connection"), std::string::npos);
}

TEST(RasNote, NotAskedSaysWhy) {
  auto p = plan();
  p.settings = ras::ras_settings(env_with("NCCL_RAS_ENABLE", "0"));
  EXPECT_EQ(
      ras_not_asked(p).at(0),
      "NCCL RAS: not asked: the ranks run with NCCL_RAS_ENABLE=0, so their NCCL serves no RAS");
  p.timeout_s = 0;
  EXPECT_TRUE(ras_not_asked(p).empty());
  EXPECT_TRUE(ras_not_asked(plan()).empty());
}

}  // namespace
}  // namespace gpudiag::launch
