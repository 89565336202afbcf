// The capture environment, checked against the real NCCL when the build has one: a child
// process sets the plan's variables, calls ncclGetUniqueId (NCCL's first log call), and the
// parent finds the log file where the plan says NCCL wrote it.
#include "nccl_log/capture.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "util/error.h"

#include "comm/nccl_api.h"

namespace gpudiag::nccl_log {
namespace {

namespace fs = std::filesystem;

class NcclLogCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("gpudiag-capture-test-" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove_all(base_); }
  std::string env(const CapturePlan& plan, const std::string& name) {
    for (const auto& [k, v] : plan.env)
      if (k == name) return v;
    return "<unset>";
  }
  fs::path base_;
};

TEST_F(NcclLogCapture, ExplicitHostPidRankName) {
  CaptureRequest req;
  req.run_dir = base_ / "run 1";
  req.host = "node7.cluster.example";
  req.pid = 4242;
  req.rank = 3;
  req.level = "Info";
  auto plan = prepare_capture(req);
  EXPECT_TRUE(fs::is_directory(plan.run_dir));
  EXPECT_EQ(plan.log_file, plan.run_dir / "nccl.rank3.node7.4242.log");
  EXPECT_EQ(env(plan, "NCCL_DEBUG"), "INFO");
  EXPECT_EQ(env(plan, "NCCL_DEBUG_SUBSYS"), "INIT,BOOTSTRAP,ENV,NET");
  EXPECT_EQ(env(plan, "NCCL_DEBUG_FILE"), plan.log_file.string());
}

TEST_F(NcclLogCapture, NcclSubstitutionWhenHostAndPidAreUnknown) {
  CaptureRequest req;
  req.run_dir = base_ / "50%";
  req.subsys = {"init,net", "GRAPH"};
  auto plan = prepare_capture(req);
  EXPECT_TRUE(plan.log_file.empty());
  // A literal '%' in the directory is doubled so NCCL does not read it as an escape.
  EXPECT_EQ(env(plan, "NCCL_DEBUG_FILE"), (base_ / "50%%").string() + "/nccl.%h.%p.log");
  EXPECT_EQ(env(plan, "NCCL_DEBUG_SUBSYS"), "INIT,NET,GRAPH");
}

TEST_F(NcclLogCapture, RejectsWhatNcclWouldSilentlyIgnore) {
  auto rejects = [&](CaptureRequest req, const std::string& word) {
    try {
      prepare_capture(req);
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted " << word;
  };
  CaptureRequest bad_subsys;
  bad_subsys.run_dir = base_;
  bad_subsys.subsys = {"INIT,NETT"};
  rejects(bad_subsys, "NETT");
  CaptureRequest bad_level;
  bad_level.run_dir = base_;
  bad_level.level = "debug";
  rejects(bad_level, "debug");
  CaptureRequest tilde;
  tilde.run_dir = "~/nccl";
  rejects(tilde, "~");
  fs::create_directories(base_);
  std::ofstream(base_ / "file") << "x";
  CaptureRequest on_file;
  on_file.run_dir = base_ / "file";
  rejects(on_file, "cannot create");
  CaptureRequest inverted;
  inverted.run_dir = base_ / "ok";
  inverted.subsys = {"^COLL,P2P"};
  EXPECT_EQ(env(prepare_capture(inverted), "NCCL_DEBUG_SUBSYS"), "^COLL,P2P");
}

TEST_F(NcclLogCapture, ShellExportsQuoteValues) {
  CaptureRequest req;
  req.run_dir = base_ / "it's";
  auto text = shell_exports(prepare_capture(req));
  EXPECT_NE(text.find("export NCCL_DEBUG='INFO'\n"), std::string::npos);
  EXPECT_NE(text.find("it'\\''s"), std::string::npos) << text;
}

TEST(NcclLogDefaultRunDir, SameForEveryRankOfAJob) {
  using Vars = std::map<std::string, std::string>;
  Env slurm(Vars{{"SLURM_JOB_ID", "812"}, {"SLURM_STEP_ID", "0"}});
  auto t = std::chrono::system_clock::now();
  EXPECT_EQ(default_run_dir(slurm, t).filename(), "gpudiag-nccl-812.0");
  EXPECT_EQ(default_run_dir(Env(Vars{{"TORCHELASTIC_RUN_ID", "a/b"}}), t).filename(),
            "gpudiag-nccl-a-b");
  EXPECT_TRUE(default_run_dir(Env(), t).filename().string().starts_with("gpudiag-nccl-20"));
}

/// Runs `request` in a child that then makes NCCL log; returns the child's pid.
pid_t run_child(CaptureRequest request, bool explicit_pid) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (explicit_pid) request.pid = ::getpid();
  apply_capture(prepare_capture(request));
  // NCCL is loaded here, after the variables are set, as a rank loads it.
  const auto& nccl = load_nccl();
  if (!nccl.usable()) ::_exit(3);
  nccl_abi::UniqueId id;
  nccl.api->GetUniqueId(&id);  // logs the bootstrap interface
  ::_exit(0);
}

std::string short_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

/// The real NCCL is loaded the way a rank loads it; without one the tests say so.
#define SKIP_WITHOUT_NCCL()                                                      \
  do {                                                                           \
    auto lib = find_nccl("", "");                                                \
    if (!lib.usable()) GTEST_SKIP() << "no real NCCL to check against: " << lib.error; \
  } while (0)

TEST_F(NcclLogCapture, RealNcclWritesWhereThePlanSays) {
  SKIP_WITHOUT_NCCL();
  CaptureRequest req;
  req.run_dir = base_ / "explicit";
  req.host = short_host();
  req.rank = 5;
  pid_t child = run_child(req, true);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  auto file =
      base_ / "explicit" / ("nccl.rank5." + short_host() + "." + std::to_string(child) + ".log");
  ASSERT_TRUE(fs::exists(file)) << file;
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  EXPECT_NE(text.str().find("NCCL INFO Bootstrap"), std::string::npos) << text.str();
}

TEST_F(NcclLogCapture, RealNcclSubstitutesHostAndPidLikeWeDo) {
  SKIP_WITHOUT_NCCL();
  CaptureRequest req;
  req.run_dir = base_ / "pattern";
  pid_t child = run_child(req, false);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  auto file = base_ / "pattern" / ("nccl." + short_host() + "." + std::to_string(child) + ".log");
  EXPECT_TRUE(fs::exists(file)) << file;
}

TEST_F(NcclLogCapture, DiscardRemovesOnlyWhatItCreatedAndOnlyWhenEmpty) {
  CaptureRequest req;
  req.run_dir = base_ / "a" / "b" / "run";
  auto plan = prepare_capture(req);
  EXPECT_EQ(plan.created, base_);  // base_ itself did not exist yet
  discard_capture(plan);
  EXPECT_FALSE(fs::exists(base_));

  fs::create_directories(base_ / "kept");  // existed before: stays
  req.run_dir = base_ / "kept";
  plan = prepare_capture(req);
  EXPECT_TRUE(plan.created.empty());
  discard_capture(plan);
  EXPECT_TRUE(fs::is_directory(base_ / "kept"));

  req.run_dir = base_ / "new" / "run";  // a log in it: stays, and so do its parents
  plan = prepare_capture(req);
  EXPECT_EQ(plan.created, base_ / "new");
  std::ofstream(plan.run_dir / "nccl.rank0.h.1.log") << "h:1:1 [0] NCCL INFO x\n";
  discard_capture(plan);
  EXPECT_TRUE(fs::exists(plan.run_dir / "nccl.rank0.h.1.log"));
  EXPECT_EQ(not_used_notice("host"),
            "--nccl-debug: NCCL is not used by the host backend; nothing to capture");
}

}  // namespace
}  // namespace gpudiag::nccl_log
