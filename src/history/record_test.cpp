// The history record's format: what is written reads back the same, over-long
// text is cut so it still reads back, and a record that is not one (wrong
// types, sizes, schema, a torn file) is refused in one line, never thrown.
#include "history/record.h"

#include <gtest/gtest.h>

namespace gpudiag::history {
namespace {

Record sample() {
  Record r;
  r.time = "2026-12-02T20:31:07Z";
  r.command = "check";
  r.host = "node7";
  r.job_id = "slurm-4242.0";
  r.job_source = "SLURM_JOB_ID=4242 SLURM_STEP_ID=0";
  r.verdict = Verdict::fault;
  r.reason = "rank 3 broken in device: Xid 79";
  r.gpus = {{"GPU-8f2c", "1650", "0000:3b:00.0", true}, {"GPU-77aa", "", "0000:5e:00.0", false}};
  r.nics = {"ib0", "mlx5_0"};
  return r;
}

std::string text_of(const nlohmann::ordered_json& j) { return j.dump(); }

TEST(HistoryRecord, ReadsBackAsWritten) {
  std::string why;
  auto back = parse_record(text_of(to_json(sample())), why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->host, "node7");
  EXPECT_EQ(back->verdict, Verdict::fault);
  EXPECT_EQ(back->job_id, "slurm-4242.0");
  ASSERT_EQ(back->gpus.size(), 2u);
  EXPECT_EQ(back->gpus[0].uuid, "GPU-8f2c");
  EXPECT_TRUE(back->gpus[0].at_fault);
  EXPECT_FALSE(back->gpus[1].at_fault);
  EXPECT_EQ(back->nics, (std::vector<std::string>{"ib0", "mlx5_0"}));
  EXPECT_EQ(to_json(sample()).begin().key(), "schema");
}

TEST(HistoryRecord, OverlongTextIsCutSoItStillReadsBack) {
  auto r = sample();
  r.reason = std::string(5000, 'x');
  r.host = std::string(400, 'h');
  r.gpus.assign(100, {"GPU-1", "", "", false});
  std::string why;
  auto back = parse_record(text_of(to_json(r)), why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->reason.size(), kMaxTextBytes);
  EXPECT_EQ(back->host.size(), kMaxNameBytes);
  EXPECT_EQ(back->gpus.size(), kMaxGpus);
}

TEST(HistoryRecord, ABadRecordIsRefusedInOneLine) {
  const auto good = to_json(sample());
  auto with = [&](const char* key, nlohmann::ordered_json value) {
    auto j = good;
    j[key] = std::move(value);
    return j.dump();
  };
  const std::vector<std::string> bad = {
      "",
      "{",
      "[1,2]",
      text_of(good).substr(0, 60),  // torn
      with("schema", "gpudiag-history/2"),
      with("time", "yesterday"),
      with("time", 12),
      with("command", "bench"),
      with("host", ""),
      with("host", std::string(300, 'h')),
      with("verdict", "maybe"),
      with("reason", std::string(kMaxTextBytes + 1, 'r')),
      with("job", "slurm-1"),
      with("gpus", "GPU-1"),
      with("gpus", nlohmann::ordered_json::array({{{"uuid", 5}}})),
      with("gpus", nlohmann::ordered_json::array(
                       {{{"uuid", "G"}, {"serial", ""}, {"bus_id", ""}, {"at_fault", "yes"}}})),
      with("nics", nlohmann::ordered_json::array({1})),
      std::string(kMaxRecordBytes + 1, ' '),
      std::string(100000, '['),
  };
  for (const auto& text : bad) {
    std::string why;
    EXPECT_FALSE(parse_record(text, why)) << text.substr(0, 80);
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(why.find('\n'), std::string::npos);
  }
}

TEST(HistoryRecord, StrangersTextIsKeptPrintable) {
  auto j = to_json(sample());
  j["reason"] = "evil\x1b[2Jline\nbreak";
  std::string why;
  auto back = parse_record(j.dump(), why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->reason.find('\x1b'), std::string::npos);
  EXPECT_EQ(back->reason.find('\n'), std::string::npos);
}

TEST(HistoryRecord, UtcTimeHasTheRecordsShape) { EXPECT_EQ(utc_time(0), "1970-01-01T00:00:00Z"); }

}  // namespace
}  // namespace gpudiag::history
