// run_launch() with a LaunchObserver, as a store-hosting launcher would use it.
#include "launch/launcher.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpudiag::launch {
namespace {

struct Recorder : LaunchObserver {
  int starts = 0;
  std::vector<ChildExit> exits;
  void on_job_start(JobInfo& job) override {
    ++starts;
    EXPECT_FALSE(job.port_given);
    job.master_port = 4242;  // as if a server had bound this port
    job.extra_env.emplace_back("GPUDIAG_STORE", "launcher");
  }
  void on_child_exit(const ChildExit& exit) override { exits.push_back(exit); }
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "launchXXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RunLaunch, ObserverAdjustsTheJobAndHearsEveryExit) {
  TempDir dir;
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.no_gpudiag = true;
  o.grace_s = 0.2;
  o.command = {"sh", "-c",
               "echo \"$GPUDIAG_STORE $MASTER_PORT\" > \"$OUT/$RANK\"; "
               "if [ \"$RANK\" = 1 ]; then "
               "  while [ ! -e \"$OUT/0\" ] || [ ! -e \"$OUT/2\" ]; do sleep 0.01; done; exit 9; "
               "fi; exec sleep 30"};
  Env env = Env::from_process();
  env.set("OUT", dir.path().string());
  Recorder recorder;

  EXPECT_EQ(run_launch(o, env, &recorder), 9);

  EXPECT_EQ(recorder.starts, 1);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_EQ(slurp(dir.path() / std::to_string(rank)), "launcher 4242\n") << "rank " << rank;
  ASSERT_EQ(recorder.exits.size(), 3u);
  EXPECT_EQ(recorder.exits[0].rank, 1);  // the failure comes first, the stopped ones after
  EXPECT_TRUE(recorder.exits[0].first_failure);
  EXPECT_FALSE(recorder.exits[0].stopped_by_launcher);
  EXPECT_EQ(recorder.exits[0].status, ExitStatus::exited(9));
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_FALSE(recorder.exits[i].first_failure);
    EXPECT_TRUE(recorder.exits[i].stopped_by_launcher);
    EXPECT_EQ(recorder.exits[i].status, ExitStatus::killed(SIGTERM));
    EXPECT_GT(recorder.exits[i].pid, 0);
  }
}

TEST(RunLaunch, AThrowingJobStartStartsNothing) {
  struct Refuses : LaunchObserver {
    void on_job_start(JobInfo&) override { throw std::runtime_error("port taken"); }
  } refuses;
  TempDir dir;
  LaunchOptions o;
  o.no_gpudiag = true;
  o.command = {"sh", "-c", "touch \"$OUT/started\""};
  Env env = Env::from_process();
  env.set("OUT", dir.path().string());
  EXPECT_THROW(run_launch(o, env, &refuses), std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "started"));
}

}  // namespace
}  // namespace gpudiag::launch
