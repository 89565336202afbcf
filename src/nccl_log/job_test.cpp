// Sorting lines into processes, and reading files and directories.
#include "nccl_log/job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace gpudiag::nccl_log {
namespace {

Job build(const std::string& text, const std::string& name = "run.log") {
  JobBuilder b;
  std::istringstream in(text);
  b.add_stream(in, name);
  return b.finish();
}

const ProcessSummary* find(const Job& job, const std::string& key) {
  for (const auto& p : job.processes)
    if (p.key == key) return &p;
  return nullptr;
}

TEST(NcclLogJob, BareVersionGoesToThePreviousProcessOfItsStream) {
  // From NVIDIA/nccl#857: rank 0 prints the version right after its network lines.
  auto job = build(
      "ai:480850:480850 [0] NCCL INFO Using network Socket\n"
      "NCCL version 2.10.3+cuda11.3\n"
      "ai:480852:480852 [2] NCCL INFO Bootstrap : Using eth0:162.30.2.40<0>\n");
  ASSERT_EQ(job.processes.size(), 2u);
  EXPECT_EQ(find(job, "ai:480850")->nccl_version, "2.10.3+cuda11.3");
  EXPECT_EQ(find(job, "ai:480852")->nccl_version, "");
}

TEST(NcclLogJob, BareVersionFollowsTheLauncherStream) {
  auto job = build(
      "[1,1]<stdout>:b:2:2 [0] NCCL INFO Using network IB\n"
      "[1,0]<stdout>:NCCL version 2.8.4+cuda11.2\n"
      "[1,0]<stdout>:a:1:1 [0] NCCL INFO Using network IB\n");
  EXPECT_EQ(find(job, "a:1")->nccl_version, "2.8.4+cuda11.2");
  EXPECT_EQ(find(job, "b:2")->nccl_version, "");
  EXPECT_EQ(find(job, "a:1")->launcher_rank, 0);
  // Without communicator lines, processes sort by launcher rank.
  EXPECT_EQ(job.processes.front().key, "a:1");
}

TEST(NcclLogJob, LinesWithoutHostBelongToTheirFile) {
  auto job = build(
      "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n"
      "[3] NCCL INFO include/shm.h:41 -> 2\n",
      "k8s.log");
  ASSERT_EQ(job.processes.size(), 1u);
  EXPECT_EQ(job.processes[0].key, "k8s.log");
  EXPECT_EQ(job.processes[0].warnings.at(0).chain.size(), 1u);
}

TEST(NcclLogJob, CountsOtherLinesButNotBlankOnes) {
  auto job =
      build("Traceback (most recent call last):\n\n  \nh:1:1 [0] NCCL INFO Using network IB\n");
  EXPECT_EQ(job.nccl_lines, 1u);
  EXPECT_EQ(job.other_lines, 1u);
  EXPECT_EQ(job.files.at(0).lines, 4u);
}

TEST(NcclLogJob, MultiNodeFromHostsNnodesOrNetTraffic) {
  EXPECT_FALSE(build("a:1:1 [0] NCCL INFO Using network IB\na:2:2 [1] NCCL INFO Using network IB\n")
                   .multi_node());
  EXPECT_TRUE(build("a:1:1 [0] NCCL INFO Using network IB\nb:2:2 [1] NCCL INFO Using network IB\n")
                  .multi_node());
  EXPECT_TRUE(build("a:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank "
                    "0 MNNVL 0\n")
                  .multi_node());
  EXPECT_TRUE(build("a:1:1 [0] NCCL INFO Channel 00/0 : 0[7000] -> 1[1b000] [send] via "
                    "NET/Socket/0\n")
                  .multi_node());
}

class NcclLogFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpudiag-nccl-job-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::filesystem::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(NcclLogFiles, ReadsADirectoryOfPerRankFilesAsOneJob) {
  write("run/nccl.a.1.log", "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n");
  write("run/sub/nccl.b.2.log", "b:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n");
  auto job = read_job({(dir_ / "run").string()});
  EXPECT_EQ(job.files.size(), 2u);
  EXPECT_EQ(job.processes.size(), 2u);
  EXPECT_EQ(job.hosts(), (std::set<std::string>{"a", "b"}));
}

TEST_F(NcclLogFiles, BadInputIsAUsageErrorNamingThePath) {
  write("junk.log", "Traceback (most recent call last):\n");
  std::filesystem::create_directories(dir_ / "empty");
  auto message = [](const std::vector<std::string>& paths) {
    try {
      read_job(paths);
    } catch (const UsageError& e) {
      EXPECT_EQ(e.code(), ExitCode::usage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({(dir_ / "missing.log").string()}).find("missing.log"), std::string::npos);
  EXPECT_NE(message({(dir_ / "empty").string()}).find("no files"), std::string::npos);
  EXPECT_NE(message({(dir_ / "junk.log").string()}).find("no NCCL log lines"), std::string::npos);
  EXPECT_NE(message({}).find("no log file"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::nccl_log
