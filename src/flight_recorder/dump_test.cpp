// torch's dump layout read from real dumps (torch 2.11 on an H200, tests/fixtures/fr/real),
// the JSON form, file names and the files of a job with missing, empty and cut dumps.
#include "flight_recorder/dump.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "flight_recorder/files.h"
#include "flight_recorder/json_value.h"
#include "flight_recorder/pickle.h"
#include "util/error.h"

namespace gpudiag::fr {
namespace {

using namespace std::string_literals;

std::string fixture(const std::string& rel) { return std::string(GPUDIAG_FR_FIXTURES) + "/" + rel; }

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(FrDump, RealWatchdogDumpFromTorch) {
  const auto path = fixture("real/watchdog_timeout/nccl_trace_rank_0");
  RankDump d = decode_dump(bytes_of(path), 0, path, Limits{});
  EXPECT_EQ(d.format, "pickle protocol 2");
  EXPECT_EQ(d.version, "2.10");
  EXPECT_TRUE(d.notes.empty());
  ASSERT_EQ(d.entries.size(), 2u);
  const Entry& first = d.entries[0];
  EXPECT_EQ(first.group, "0");
  EXPECT_EQ(first.group_desc, "default_pg");
  EXPECT_EQ(first.seq, 1);
  EXPECT_EQ(first.state, State::completed);
  EXPECT_TRUE(first.start_recorded);
  EXPECT_EQ(first.op.name, "nccl:all_reduce");
  EXPECT_EQ(first.op.in_sizes, (std::vector<std::vector<std::int64_t>>{{4096}}));
  EXPECT_EQ(first.op.in_dtypes, std::vector<std::string>{"Half"});
  EXPECT_EQ(d.entries[1].state, State::scheduled);  // the all_reduce that timed out
  EXPECT_FALSE(d.entries[1].start_recorded);
  ASSERT_EQ(d.groups.count("0"), 1u);
  EXPECT_EQ(d.groups["0"].ranks, std::vector<int>{0});
  EXPECT_EQ(d.status[0].enqueued, 2);
  EXPECT_EQ(d.status[0].completed, 1);
}

TEST(FrDump, RealJsonDumpMatchesItsPickle) {
  const auto pj = fixture("real/queued_behind_kernel_json/nccl_trace_rank_0.json");
  const auto pp = fixture("real/queued_behind_kernel/nccl_trace_rank_0");
  RankDump j = decode_dump(bytes_of(pj), 0, pj, Limits{});
  RankDump p = decode_dump(bytes_of(pp), 0, pp, Limits{});
  EXPECT_EQ(j.format, "json");
  ASSERT_EQ(j.entries.size(), p.entries.size());
  for (std::size_t k = 0; k < j.entries.size(); ++k) {
    EXPECT_EQ(j.entries[k].seq, p.entries[k].seq);
    EXPECT_EQ(j.entries[k].group, p.entries[k].group);
    EXPECT_EQ(j.entries[k].op.name, p.entries[k].op.name);
    EXPECT_EQ(j.entries[k].op.in_sizes, p.entries[k].op.in_sizes);
  }
  // The last all_reduce (bf16) waits behind a 2 s kernel: queued, its start never seen.
  EXPECT_EQ(j.entries.back().state, State::scheduled);
  EXPECT_FALSE(j.entries.back().start_recorded);  // JSON writes 0 for "not seen"
  EXPECT_EQ(j.entries.back().op.in_dtypes, std::vector<std::string>{"BFloat16"});
  EXPECT_EQ(j.status[0].enqueued, 4);  // pg_status as strs in JSON
  EXPECT_EQ(j.groups["1"].desc, "tp_group");
}

TEST(FrDump, VersionsAndOldLayouts) {
  EXPECT_TRUE(known_version("2.0"));
  EXPECT_TRUE(known_version("2.4"));
  EXPECT_TRUE(known_version("2.10"));
  EXPECT_FALSE(known_version("2.11"));
  EXPECT_FALSE(known_version("1.4"));
  // A 1.x entry: seq_id, no process_group: the group is the pg_id.
  const std::string j =
      R"({"version": "1.4", "entries": [{"pg_id": 3, "seq_id": 9, "profiling_name":
      "nccl:broadcast", "state": "completed"}, {"state": "completed"}, 5]})";
  RankDump d = read_dump(decode_json(j, Limits{}), 1, "x", "json");
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_EQ(d.entries[0].group, "3");
  EXPECT_EQ(d.entries[0].seq, 9);
  ASSERT_EQ(d.notes.size(), 3u);
  EXPECT_NE(d.notes[0].find("version 1.4 is not one gpudiag knows"), std::string::npos);
  EXPECT_NE(d.notes[1].find("1 entries skipped: no process_group"), std::string::npos);
  EXPECT_NE(d.notes[2].find("1 entries skipped: not a dict"), std::string::npos);
}

TEST(FrDump, NotADump) {
  EXPECT_THROW(read_dump(decode_json("[1, 2]", Limits{}), 0, "x", "json"), FormatError);
  EXPECT_THROW(read_dump(decode_json(R"({"a": 1})", Limits{}), 0, "x", "json"), FormatError);
  EXPECT_THROW(decode_dump("PK\x03\x04", 0, "x", Limits{}), FormatError);
  EXPECT_THROW(decode_dump("", 0, "x", Limits{}), FormatError);
}

TEST(FrDump, JsonLimitsAndTruncation) {
  try {
    decode_json(std::string(1000, '[') + std::string(1000, ']'), Limits{});
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("deeper than 64"), std::string::npos) << e.what();
  }
  try {
    decode_json(R"({"version": "2.10", "entries": [)", Limits{});
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_TRUE(e.truncated()) << e.what();
  }
  try {
    decode_json(R"({"version": 2.10,})", Limits{});
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_FALSE(e.truncated()) << e.what();
  }
  Limits tiny;
  tiny.max_values = 5;
  EXPECT_THROW(decode_json("[1,2,3,4,5,6]", tiny), FormatError);
}

std::string pstr(const std::string& s) {  // BINUNICODE
  std::string p = "X";
  for (int k = 0; k < 4; ++k) p += static_cast<char>(s.size() >> (8 * k));
  return p + s;
}

std::string refusal(const std::string& pickle) {
  try {
    decode_dump(pickle, 0, "x", Limits{});
  } catch (const FormatError& e) {
    return e.what();
  }
  return "decoded";
}

TEST(FrDump, ANameSharedByEveryEntryIsCutWhereItIsRead) {
  // One 64 KiB name, memoized once (BINPUT 0) and referenced by pg_config and by every
  // entry's process_group (one tuple, BINPUT 1): each entry once held its own copies.
  const std::string name(64 << 10, 'g');
  std::string p = "\x80\x02}(" + pstr("version") + pstr("2.10") + pstr("pg_config") + "}(" +
                  pstr(name) + "q\x00}("s + pstr("desc") + "h\x00"s + pstr("ranks") + pstr("[0]") +
                  "uu" + pstr("entries") + "](";
  for (int k = 0; k < 200; ++k)
    p += "}(" + pstr("process_group") + (k ? "h\x01"s : "h\x00h\x00\x86q\x01"s) +
         pstr("collective_seq_id") + "K" + static_cast<char>(k % 100 + 1) + pstr("profiling_name") +
         pstr("nccl:all_reduce") + pstr("state") + pstr("completed") + "u";
  RankDump d = decode_dump(p + "eu.", 0, "x", Limits{});
  ASSERT_EQ(d.entries.size(), 200u);
  for (const auto& e : d.entries) {
    EXPECT_EQ(e.group, name.substr(0, kMaxNameBytes));
    EXPECT_EQ(e.group_desc, name.substr(0, kMaxNameBytes));
  }
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups.begin()->first, name.substr(0, kMaxNameBytes));
  EXPECT_EQ(d.groups.begin()->second.desc.size(), kMaxNameBytes);
  EXPECT_EQ(d.groups.begin()->second.ranks, std::vector<int>{0});
}

/// A dump whose pg_config gives `groups` groups one ranks str, memoized and shared.
std::string shared_ranks_dump(int groups, const std::string& ranks) {
  std::string p = "\x80\x02}(" + pstr("version") + pstr("2.10") + pstr("pg_config") + "}(";
  for (int g = 0; g < groups; ++g)
    p += pstr(std::to_string(g)) + "}(" + pstr("ranks") + (g ? "h\x00"s : pstr(ranks) + "q\x00"s) +
         "u";
  return p + "u" + pstr("entries") + "]u.";
}

TEST(FrDump, RankListsAreBoundedPerGroupAndPerDump) {
  // A shared str is read for every group that shares it.
  RankDump d = decode_dump(shared_ranks_dump(3, "[0, 2]"), 0, "x", Limits{});
  ASSERT_EQ(d.groups.size(), 3u);
  for (const auto& [name, g] : d.groups) EXPECT_EQ(g.ranks, (std::vector<int>{0, 2})) << name;
  // A million ranks in one str, shared by five groups: five million, past the dump's limit.
  std::string million = "[0";
  for (int r = 1; r < 1000000; ++r) million += ", " + std::to_string(r);
  million += "]";
  EXPECT_EQ(decode_dump(shared_ranks_dump(4, million), 0, "x", Limits{}).groups.size(), 4u);
  EXPECT_EQ(refusal(shared_ranks_dump(5, million)),
            "pg_config lists more than 4194304 ranks in all its groups: the limit of one dump");
  // One group listing more ranks than any job has: refused once it lists one too many.
  std::string many;
  for (std::size_t k = 0; k <= kMaxGroupRanks; ++k) many += "7,";
  EXPECT_EQ(refusal(shared_ranks_dump(1, many)),
            "pg_config lists more than 2097152 ranks in group 0: the limit of one group");
}

TEST(FrFiles, RankFromTheFileName) {
  EXPECT_EQ(rank_from_name("nccl_trace_rank_12"), 12);
  EXPECT_EQ(rank_from_name("myjob-3"), 3);
  EXPECT_EQ(rank_from_name("rank_0.json"), 0);
  EXPECT_EQ(rank_from_name("7.pkl"), 7);
  EXPECT_EQ(rank_from_name("nccl_trace_rank_"), std::nullopt);
  EXPECT_EQ(rank_from_name("README.md"), std::nullopt);
  EXPECT_EQ(rank_from_name("r99999999999"), std::nullopt);
}

TEST(FrFiles, MissingEmptyAndCutFilesAreReportedAndTheRestRead) {
  Inputs in = read_inputs({fixture("e_partial")}, Limits{});
  ASSERT_EQ(in.dumps.size(), 1u);
  EXPECT_EQ(in.dumps[0].rank, 0);
  ASSERT_EQ(in.problems.size(), 2u);
  EXPECT_EQ(in.problems[0].rank, 2);
  EXPECT_EQ(in.problems[0].kind, "empty");
  EXPECT_EQ(in.problems[1].rank, 3);
  EXPECT_EQ(in.problems[1].kind, "truncated");
}

TEST(FrFiles, HostileFilesAreRefusedEachWithItsReason) {
  Inputs in = read_inputs({fixture("f_hostile")}, Limits{});
  EXPECT_TRUE(in.dumps.empty());
  ASSERT_EQ(in.problems.size(), 4u);
  EXPECT_NE(in.problems[0].detail.find("GLOBAL builtins.print"), std::string::npos);
  EXPECT_NE(in.problems[1].detail.find("nested deeper than 64"), std::string::npos);
  EXPECT_NE(in.problems[2].detail.find("corrupt"), std::string::npos);
  EXPECT_NE(in.problems[3].detail.find("more than 4194304 values"), std::string::npos);
  for (const auto& p : in.problems) EXPECT_EQ(p.kind, "not-a-dump");
}

TEST(FrFiles, TooLargeIsRefusedUnread) {
  Limits small;
  small.max_file_bytes = 100;
  Inputs in = read_inputs({fixture("a_missing/nccl_trace_rank_0")}, small);
  ASSERT_EQ(in.problems.size(), 1u);
  EXPECT_EQ(in.problems[0].kind, "too-large");
}

TEST(FrFiles, BadPathsAreUsageErrors) {
  EXPECT_THROW(read_inputs({fixture("no/such/dir")}, Limits{}), UsageError);
  EXPECT_THROW(read_inputs({"/dev/null"}, Limits{}), UsageError);
}

}  // namespace
}  // namespace gpudiag::fr
