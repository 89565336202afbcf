// The readers of RAS's reports against the reports the model of RAS renders from NCCL's
// source (tests/fixtures/ras, written by make_fixtures.py): every scenario in every form,
// then bytes that are not RAS's.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nccl_ras/report.h"

namespace gpudiag::ras {
namespace {

constexpr const char* kWorld = "5a1e4c0ffee12345";

std::string bytes_of(const std::string& name) {
  std::ifstream in(std::string(GPUDIAG_RAS_FIXTURES) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

/// Every form of one scenario: {file, report}.
std::vector<std::pair<std::string, Report>> forms(const std::string& scenario) {
  std::vector<std::pair<std::string, Report>> out;
  for (const char* v : {"2.24.3", "2.26.6", "2.30.7"}) {
    auto name = scenario + "-" + v + ".txt";
    out.emplace_back(name, parse_text(bytes_of(name)));
  }
  for (const char* v : {"2.28.9", "2.30.7"}) {
    auto name = scenario + "-" + v + ".json";
    out.emplace_back(name, parse_json(bytes_of(name)));
  }
  return out;
}

bool old_text(const std::string& name) { return name.find("2.24.3") != std::string::npos; }

TEST(RasParse, HealthyJobIsClean) {
  for (const auto& [name, r] : forms("healthy")) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(r.clean());
    EXPECT_EQ(r.nccl_version, name.substr(8, 6));
    EXPECT_EQ(r.processes, 4);
    EXPECT_EQ(r.nodes, 1);
    EXPECT_EQ(r.communicators, 1);
    EXPECT_EQ(r.format, name.ends_with(".json") ? "json" : "text");
    EXPECT_TRUE(r.notes.empty());
  }
}

TEST(RasParse, MisalignedCommunicatorsAreUnreliable) {
  // 2.26 to 2.28.9 read the communicator after one with missing ranks from its missing-rank
  // records (client_support.cc rasClientRunComms): in the model's 2.26.6 text a communicator
  // of no ranks and 771 "missing" ones stands where the pair of ranks 0 and 1 should be.
  auto bad = parse_text(bytes_of("misaligned-2.26.6.txt"));
  EXPECT_TRUE(bad.rows_unreliable);
  EXPECT_EQ(bad.unresponsive_count, 1);  // the job-wide lines hold
  ASSERT_EQ(bad.missing.size(), 2u);
  EXPECT_EQ(bad.missing[1].count, 771);
  for (const char* good : {"misaligned-2.24.3.txt", "misaligned-2.30.7.txt", "many-2.26.6.txt",
                           "silent-2.26.6.txt", "dead-2.26.6.txt"}) {
    SCOPED_TRACE(good);
    EXPECT_FALSE(parse_text(bytes_of(good)).rows_unreliable);
  }
  // The JSON steps over the records right in every version that has it.
  EXPECT_FALSE(parse_json(bytes_of("misaligned-2.28.9.json")).rows_unreliable);
  auto right = parse_text(bytes_of("misaligned-2.30.7.txt"));
  ASSERT_EQ(right.mismatches.size(), 1u);
  EXPECT_EQ(right.mismatches[0].comm, "7ac0ffee00000001");
}

TEST(RasParse, RankBehindIsNamed) {
  for (const auto& [name, r] : forms("behind")) {
    SCOPED_TRACE(name);
    ASSERT_EQ(r.mismatches.size(), 1u);
    const auto& m = r.mismatches[0];
    EXPECT_EQ(m.comm, kWorld);
    EXPECT_EQ(m.comm_size, 4);
    // 2.24 and 2.25 count every collective together (Broadcast 2 + AllReduce 120).
    EXPECT_EQ(m.what, old_text(name) ? "collective" : "AllReduce");
    ASSERT_EQ(m.groups.size(), 2u);
    EXPECT_EQ(m.groups[0].value, old_text(name) ? "122" : "120");
    EXPECT_EQ(m.groups[0].count, 3);
    EXPECT_EQ(m.groups[1].value, old_text(name) ? "121" : "119");
    ASSERT_EQ(m.groups[1].ranks.size(), 1u);
    EXPECT_EQ(m.groups[1].ranks[0].rank, 3);
    EXPECT_EQ(m.groups[1].ranks[0].process.pid, 4003);
    EXPECT_EQ(m.groups[1].ranks[0].process.host, "127.0.0.1");
    EXPECT_EQ(m.groups[1].ranks[0].process.gpus, "3");
    EXPECT_EQ(r.dead_count + r.unresponsive_count, 0);
  }
}

TEST(RasParse, DeadProcessAndItsRank) {
  for (const auto& [name, r] : forms("dead")) {
    SCOPED_TRACE(name);
    EXPECT_EQ(r.dead_count, 1);
    ASSERT_EQ(r.dead.size(), 1u);
    EXPECT_EQ(r.dead[0].pid, 4003);
    EXPECT_EQ(r.dead[0].host, "10.0.0.2");
    EXPECT_EQ(r.unresponsive_count, 0);
    ASSERT_EQ(r.missing.size(), 1u);
    ASSERT_EQ(r.missing[0].ranks.size(), 1u);
    EXPECT_EQ(r.missing[0].ranks[0].rank, 3);
    if (!old_text(name)) {
      EXPECT_EQ(r.missing[0].ranks[0].process.pid, 4003);
    }
    EXPECT_EQ(r.nodes, 2);
    // 2.28.9's JSON lacks a comma when a rank is missing: read, and said so.
    EXPECT_EQ(r.notes.size(), name == "dead-2.28.9.json" ? 1u : 0u);
  }
}

TEST(RasParse, SilentProcessAndARankBehind) {
  for (const auto& [name, r] : forms("silent")) {
    SCOPED_TRACE(name);
    EXPECT_EQ(r.unresponsive_count, 1);
    ASSERT_EQ(r.unresponsive.size(), 1u);
    EXPECT_EQ(r.unresponsive[0].pid, 4002);
    EXPECT_EQ(r.dead_count, 0);
    EXPECT_EQ(r.timeouts, 1);
    ASSERT_EQ(r.mismatches.size(), 1u);
    const auto& g = r.mismatches[0].groups;
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(g[1].ranks.at(0).rank, 1);
    EXPECT_EQ(g[1].value, old_text(name) ? "120" : "118");
  }
}

TEST(RasParse, AsynchronousError) {
  for (const auto& [name, r] : forms("failed")) {
    SCOPED_TRACE(name);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].phase, "asynchronous");
    EXPECT_EQ(r.errors[0].error, "Remote process error");
    EXPECT_EQ(r.errors[0].comm, kWorld);
    ASSERT_EQ(r.errors[0].ranks.size(), 1u);
    EXPECT_EQ(r.errors[0].ranks[0].rank, 1);
    EXPECT_EQ(r.errors[0].ranks[0].process.pid, 4001);
    EXPECT_TRUE(r.mismatches.empty());
  }
}

TEST(RasParse, AbortedRankIsAStateMismatch) {
  for (const auto& [name, r] : forms("aborted")) {
    SCOPED_TRACE(name);
    ASSERT_EQ(r.mismatches.size(), 1u);
    const auto& m = r.mismatches[0];
    EXPECT_EQ(m.what, "status");
    ASSERT_EQ(m.groups.size(), 2u);
    EXPECT_EQ(m.groups[0].value, "RUNNING");
    EXPECT_EQ(m.groups[0].count, 3);
    EXPECT_EQ(m.groups[1].value, "ABORT");
    EXPECT_EQ(m.groups[1].ranks.at(0).rank, 2);
  }
}

TEST(RasParse, ManyRanksTwoCommunicators) {
  for (const auto& [name, r] : forms("many")) {
    SCOPED_TRACE(name);
    EXPECT_EQ(r.processes, 16);
    EXPECT_EQ(r.communicators, 2);
    ASSERT_EQ(r.mismatches.size(), 2u);
    const auto& world = r.mismatches[0];
    EXPECT_EQ(world.comm, kWorld);
    ASSERT_EQ(world.groups.size(), 2u);
    EXPECT_EQ(world.groups[0].count, 12);
    EXPECT_EQ(world.groups[1].count, 4);
    // VERBOSE names a group under half the communicator: ranks 4-7.
    ASSERT_EQ(world.groups[1].ranks.size(), 4u);
    EXPECT_EQ(rank_list({world.groups[1].ranks[0].rank, world.groups[1].ranks[3].rank}), "4,7");
    const auto& sub = r.mismatches[1];
    EXPECT_EQ(sub.comm, "00b0e5d00d00c0de");
    EXPECT_EQ(sub.what, old_text(name) ? "collective" : "Broadcast");
    ASSERT_EQ(sub.groups.size(), 2u);
    EXPECT_EQ(sub.groups[1].value, "0");
    EXPECT_EQ(sub.groups[1].ranks.at(0).process.host, "10.0.0.2");
  }
}

TEST(RasParse, TextThatIsNotRas) {
  for (std::string bad : {std::string(), std::string("\n\n"), std::string("HTTP/1.1 200 OK\r\n"),
                          std::string("\x00\xff\xfe garbage", 12), std::string(5000, 'x')})
    EXPECT_THROW(parse_text(bad), ParseError);
  // Cut before its Warnings: not a whole report.
  auto whole = bytes_of("behind-2.30.7.txt");
  EXPECT_THROW(parse_text(whole.substr(0, whole.find("Warnings"))), ParseError);
  // A line RAS never prints is skipped; numbers too long for a count are not read as one.
  auto odd = whole + "  99999999999999999999999 ranks have launched up to operation 1\n\x1b[31m\n";
  EXPECT_NO_THROW(parse_text(odd));
  // A communicator table a stranger wrote: negative and huge numbers are not sizes.
  auto table = whole;
  table.insert(table.find("\nErrors"),
               "\n   -1  9223372036854775807  1  1  5  5  RUNNING  OK\n"
               "99999  9223372036854775807  1  1  5  5  RUNNING  OK\n");
  auto r = parse_text(table);
  EXPECT_LE(r.communicators, 1LL << 40);
}

TEST(RasParse, JsonThatIsNotRas) {
  const std::vector<std::string> bad = {
      "",
      "[]",
      "{}",
      "null",
      "{\"nccl_version\": 3}",
      "{\"nccl_version\": \"2.28.9\"}",
      "{\"nccl_version\": \"2.28.9\", \"communicators\": [7]}",
      "{\"nccl_version\": \"2.28.9\", \"communicators\": [{\"hash\": \"zz\", \"size\": 1, "
      "\"ranks\": [], \"missing_ranks\": []}]}",
      std::string(100000, '[') + std::string(100000, ']'),
      std::string(3, '\xff'),
  };
  for (const auto& b : bad) EXPECT_THROW(parse_json(b), ParseError) << b.substr(0, 60);
  auto whole = bytes_of("behind-2.30.7.json");
  EXPECT_THROW(parse_json(whole.substr(0, whole.size() / 2)), ParseError);
  // A count as a string, a negative pid's type is fine, a huge count is read exactly.
  auto s = whole;
  s.replace(s.find("\"AllReduce\": 120"), 16, "\"AllReduce\": \"x\"");
  EXPECT_THROW(parse_json(s), ParseError);
  s = whole;
  s.replace(s.find("\"AllReduce\": 120"), 16, "\"AllReduce\": 18446744073709551615");
  auto r = parse_json(s);
  ASSERT_EQ(r.mismatches.size(), 1u);
  ASSERT_EQ(r.mismatches[0].groups.size(), 3u);
  EXPECT_EQ(r.mismatches[0].groups[1].value, "18446744073709551615");
}

TEST(RasParse, MergeKeepsOneOfEach) {
  auto a = parse_json(bytes_of("silent-2.30.7.json"));
  auto b = parse_text(bytes_of("silent-2.26.6.txt"));
  auto c = parse_json(bytes_of("dead-2.30.7.json"));
  auto m = merge({a, b, c});
  EXPECT_EQ(m.unresponsive.size(), 1u);
  EXPECT_EQ(m.dead.size(), 1u);
  EXPECT_EQ(m.mismatches.size(), 1u);
  EXPECT_EQ(m.mismatches[0].groups[0].ranks.size(), 2u) << "the fuller (JSON) one is kept";
}

}  // namespace
}  // namespace gpudiag::ras
