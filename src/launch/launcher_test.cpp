// run_launch() with a LaunchObserver, as a store-hosting launcher would use it.
#include "launch/launcher.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
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

/// For --no-gpudiag ranks: rank $FIRST exits $FIRST_CODE at once; rank $THEN
/// waits until the launcher has reaped rank $FIRST (its pid is gone), then
/// exits $THEN_CODE; every other rank exits 0. So the launcher sees the two
/// failures in this order on every run.
constexpr const char* kExitsInOrder = R"sh(
case $RANK in
  "$FIRST") echo $$ > "$OUT/pid.tmp"; mv "$OUT/pid.tmp" "$OUT/pid"; exit "$FIRST_CODE" ;;
  "$THEN") while [ ! -e "$OUT/pid" ]; do sleep 0.01; done
           while kill -0 "$(cat "$OUT/pid")" 2>/dev/null; do sleep 0.01; done
           exit "$THEN_CODE" ;;
esac
exit 0)sh";

/// Runs 3 ranks of kExitsInOrder; returns the launcher's exit status.
int run_in_order(int first, int first_code, int then, int then_code, LaunchObserver* observer) {
  TempDir dir;
  Env env = Env::from_process();
  env.set("OUT", dir.path().string());
  env.set("FIRST", std::to_string(first));
  env.set("FIRST_CODE", std::to_string(first_code));
  env.set("THEN", std::to_string(then));
  env.set("THEN_CODE", std::to_string(then_code));
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.no_gpudiag = true;
  o.grace_s = 120;  // the later rank ends on its own, long before this
  o.command = {"sh", "-c", kExitsInOrder};
  return run_launch(o, env, observer);
}

TEST(RunLaunch, ExitStatusDoesNotDependOnWhichRankFailedFirst) {
  // Rank 1 times out (3) first, rank 2 names the failure (1) after: 1.
  Recorder recorder;
  EXPECT_EQ(run_in_order(1, 3, 2, 1, &recorder), 1);
  ASSERT_EQ(recorder.exits.size(), 3u);
  auto first = std::find_if(recorder.exits.begin(), recorder.exits.end(),
                            [](const ChildExit& e) { return e.first_failure; });
  ASSERT_NE(first, recorder.exits.end());
  EXPECT_EQ(first->rank, 1);  // the order really was the "wrong" one
  // The same fault the other way round gives the same status.
  EXPECT_EQ(run_in_order(2, 1, 1, 3, nullptr), 1);
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
