// NCCL_COMM_BLOCKING and NCCL_COMM_ID (nccl_env.h): the warning lines, read
// as NCCL reads the values; what the check and the sweep do to their own
// environment (the process's, restored after each test); and `gpudiag info`
// showing the same line in its warning block and its JSON.
#include "comm/nccl_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "world/info.h"

namespace gpudiag {
namespace {

Env env_of(std::map<std::string, std::string> vars) { return Env(vars); }

std::string texts(const std::vector<NcclEnvWarning>& ws) {
  std::string out;
  for (const auto& w : ws) out += w.variable + ": " + w.text + "\n";
  return out;
}

TEST(NcclEnv, CommBlockingWarnsWhereNcclReadsOne) {
  for (const char* v : {"1", "01", "0x1"}) {
    const auto ws = nccl_env_warnings(env_of({{"NCCL_COMM_BLOCKING", v}}));
    ASSERT_EQ(ws.size(), 1u) << v;
    EXPECT_EQ(ws[0].variable, "NCCL_COMM_BLOCKING");
    EXPECT_NE(ws[0].text.find("NCCL_COMM_BLOCKING=" + std::string(v) +
                              " makes every NCCL "
                              "communicator blocking"),
              std::string::npos)
        << ws[0].text;
    EXPECT_NE(ws[0].text.find("set it to 0 for their own NCCL"), std::string::npos);
  }
  for (const char* v : {"0", "", "2"})  // non-blocking, unset, or no override
    EXPECT_TRUE(nccl_env_warnings(env_of({{"NCCL_COMM_BLOCKING", v}})).empty()) << v;
}

TEST(NcclEnv, CommIdSaysWhatTheCheckAndTheSweepDo) {
  const auto ws = nccl_env_warnings(env_of({{"NCCL_COMM_ID", "10.0.0.1:29500"}}));
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_NE(ws[0].text.find("NCCL_COMM_ID=10.0.0.1:29500"), std::string::npos) << ws[0].text;
  EXPECT_NE(ws[0].text.find("check and bench honour it"), std::string::npos) << ws[0].text;
  EXPECT_NE(ws[0].text.find("sweep clears it for its pair communicators"), std::string::npos);
  EXPECT_TRUE(nccl_env_warnings(env_of({{"NCCL_DEBUG", "INFO"}})).empty());
}

/// Sets the process's variables for a test and puts them back after it.
class ProcessEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"NCCL_COMM_BLOCKING", "NCCL_COMM_ID"})
      if (const char* v = std::getenv(n)) saved_[n] = v;
  }
  void TearDown() override {
    for (const char* n : {"NCCL_COMM_BLOCKING", "NCCL_COMM_ID"}) {
      auto it = saved_.find(n);
      if (it == saved_.end())
        ::unsetenv(n);
      else
        ::setenv(n, it->second.c_str(), 1);
    }
  }
  static std::optional<std::string> get(const char* n) {
    const char* v = std::getenv(n);
    return v ? std::optional<std::string>(v) : std::nullopt;
  }
  std::map<std::string, std::string> saved_;
};

TEST_F(ProcessEnv, TheCheckSetsCommBlockingToZeroAndHonoursCommId) {
  ::setenv("NCCL_COMM_BLOCKING", "1", 1);
  ::setenv("NCCL_COMM_ID", "10.0.0.1:29500", 1);
  const auto ws = prepare_nccl_env(Env::from_process(), NcclEnvUse::check);
  EXPECT_EQ(ws.size(), 2u) << texts(ws);
  EXPECT_EQ(get("NCCL_COMM_BLOCKING"), "0");
  EXPECT_EQ(get("NCCL_COMM_ID"), "10.0.0.1:29500");
}

TEST_F(ProcessEnv, TheSweepClearsCommIdForItsPairs) {
  ::unsetenv("NCCL_COMM_BLOCKING");
  ::setenv("NCCL_COMM_ID", "10.0.0.1:29500", 1);
  const auto ws = prepare_nccl_env(Env::from_process(), NcclEnvUse::sweep);
  ASSERT_EQ(ws.size(), 1u) << texts(ws);
  EXPECT_EQ(ws[0].variable, "NCCL_COMM_ID");
  // Set even where unset: a line of /etc/nccl.conf could not make it blocking.
  EXPECT_EQ(get("NCCL_COMM_BLOCKING"), "0");
  EXPECT_EQ(get("NCCL_COMM_ID"), std::nullopt);
}

TEST(NcclEnv, InfoShowsTheLineInItsWarningsAndItsJson) {
  const Env env = env_of({{"NCCL_COMM_BLOCKING", "1"}});
  const auto info = collect_info(env);
  const std::string line = nccl_env_warnings(env).at(0).text;
  ASSERT_TRUE(info.contains("warnings"));
  bool found = false;
  for (const auto& w : info["warnings"]) found = found || w.get<std::string>() == line;
  EXPECT_TRUE(found) << info["warnings"].dump();
  EXPECT_NE(render_info(info).find("  warning   " + line), std::string::npos) << render_info(info);
}

}  // namespace
}  // namespace gpudiag
