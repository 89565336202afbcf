// The history folder: records written by many threads at once all read back;
// a file in the middle of being written, a stranger's file, a link, a FIFO, an
// oversized or torn record are skipped and counted, never a crash; the tally
// counts a host once per job, finds a GPU that moved, and names the hosts
// sweep --exclude-history leaves out.
#include "history/folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "history/tally.h"
#include "util/error.h"

namespace gpudiag::history {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "gpudiag-history-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Record rec(const std::string& host, const std::string& job, Verdict v, const std::string& time,
           std::vector<GpuId> gpus = {}) {
  Record r;
  r.time = time;
  r.command = "check";
  r.host = host;
  r.job_id = job;
  r.verdict = v;
  r.reason = v == Verdict::fault ? "rank 1 broken in device" : "";
  r.gpus = std::move(gpus);
  return r;
}

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(HistoryFolder, ManyWritersAtOnceLoseNothing) {
  TempDir d;
  const std::string dir = d.path() + "/shared/history";  // made by the first writer
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i)
        EXPECT_EQ(write_record(dir, rec("node" + std::to_string(t), "job" + std::to_string(i),
                                        Verdict::ok, "2026-12-02T20:31:07Z")),
                  "");
    });
  for (auto& w : writers) w.join();
  auto f = read_folder(dir);
  EXPECT_EQ(f.records.size(), 200u);
  EXPECT_EQ(f.skipped, 0u);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_NE(e.path().filename().string()[0], '.');  // no temporary left behind
}

TEST(HistoryFolder, WhatIsNotARecordIsSkippedAndCounted) {
  TempDir d;
  const auto& dir = d.path();
  ASSERT_EQ(write_record(dir, rec("good", "j1", Verdict::ok, "2026-12-02T20:31:07Z")), "");
  put(dir + "/torn.json", "{\"schema\": \"gpudiag-history/1\", \"time\"");
  put(dir + "/foreign.json", "{\"hello\": 1}");
  put(dir + "/big.json", std::string(kMaxRecordBytes + 10, ' '));
  put(dir + "/.in-flight.json.tmp", "{");  // a writer's temporary: not listed at all
  put(dir + "/notes.txt", "not ours");     // not a .json: not listed at all
  ASSERT_EQ(::mkfifo((dir + "/fifo.json").c_str(), 0644), 0);  // never waited on
  std::filesystem::create_symlink("/etc/passwd", dir + "/link.json");
  std::filesystem::create_directory(dir + "/folder.json");
  auto f = read_folder(dir);
  EXPECT_EQ(f.records.size(), 1u);
  EXPECT_EQ(f.skipped, 6u);
  EXPECT_EQ(f.skipped_why.size(), 5u);  // the first few reasons are kept
}

TEST(HistoryFolder, TheNewestAreReadPastTheLimit) {
  TempDir d;
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(write_record(d.path(), rec("h", "j", Verdict::ok,
                                         "2026-12-0" + std::to_string(i + 1) + "T00:00:00Z")),
              "");
  auto f = read_folder(d.path(), {3});
  EXPECT_EQ(f.records.size(), 3u);
  EXPECT_EQ(f.not_read, 2u);
  EXPECT_EQ(f.records.front().time, "2026-12-03T00:00:00Z");
}

TEST(HistoryFolder, AMissingFolderIsAUsageError) {
  EXPECT_THROW(read_folder("/nonexistent/gpudiag-history"), UsageError);
}

TEST(HistoryTally, AHostCountsOncePerJob) {
  std::vector<Record> r = {
      rec("n1", "slurm-1", Verdict::fault, "2026-12-01T00:00:00Z"),
      rec("n1", "slurm-1", Verdict::fault, "2026-12-01T00:00:01Z"),  // another rank, same job
      rec("n1", "slurm-2", Verdict::fault, "2026-12-02T00:00:00Z"),
      rec("n2", "slurm-2", Verdict::other, "2026-12-02T00:00:00Z"),
      rec("n1", "", Verdict::fault, "2026-12-03T00:00:00Z"),  // by hand: a job of its own
      rec("n1", "", Verdict::fault, "2026-12-03T00:00:01Z"),
      rec("n3", "slurm-3", Verdict::ok, "2026-12-03T00:00:00Z"),
  };
  auto t = tally(r);
  ASSERT_EQ(t.hosts.size(), 3u);
  EXPECT_EQ(t.hosts[0].host, "n1");
  EXPECT_EQ(t.hosts[0].faults, 4);
  EXPECT_EQ(t.hosts[1].faults, 0);
  auto out = hosts_at_fault(t, 3, "");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, "n1");
  EXPECT_NE(out[0].second.find("at fault in 4 jobs"), std::string::npos) << out[0].second;
  EXPECT_TRUE(hosts_at_fault(t, 5, "").empty());
  EXPECT_TRUE(hosts_at_fault(t, 0, "").empty());  // 0: off
  // Since a time: the older records are not counted.
  EXPECT_EQ(tally(r, "2026-12-02T00:00:00Z").hosts[0].faults, 3);
}

TEST(HistoryTally, AGpuUnderAnotherHostNameIsAMove) {
  std::vector<Record> r = {
      rec("n1", "j1", Verdict::fault, "2026-12-01T00:00:00Z", {{"GPU-a", "", "", true}}),
      rec("n1", "j2", Verdict::ok, "2026-12-02T00:00:00Z", {{"GPU-a", "", "", false}}),
      rec("n9", "j3", Verdict::fault, "2026-12-03T00:00:00Z", {{"GPU-a", "", "", true}}),
      rec("n2", "j3", Verdict::ok, "2026-12-03T00:00:00Z", {{"GPU-b", "", "", false}}),
  };
  auto t = tally(r);
  ASSERT_EQ(t.moves.size(), 1u);
  EXPECT_EQ(t.moves[0].uuid, "GPU-a");
  EXPECT_EQ(t.moves[0].from, "n1");
  EXPECT_EQ(t.moves[0].to, "n9");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].uuid, "GPU-a");
  EXPECT_EQ(t.gpus[0].faults, 2);
  EXPECT_EQ(t.gpus[0].hosts, (std::vector<std::string>{"n1", "n9"}));
  EXPECT_NE(tally_text(t, {}, "").find("moved: GPU-a was on n1, then on n9"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::history
