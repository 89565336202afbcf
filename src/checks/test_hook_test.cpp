#include "checks/test_hook.h"

#include <gtest/gtest.h>

#include <csignal>

namespace gpudiag {
namespace {

Env env_with(const std::string& value) {
  Env env;
  env.set("GPUDIAG_TEST_RAISE", value);
  return env;
}

std::optional<TestRaise> parse(const std::string& v) {
  std::string error;
  auto t = parse_test_raise(v, error);
  EXPECT_EQ(t.has_value(), error.empty()) << v << ": " << error;
  return t;
}

TEST(TestHook, PhaseOnly) {
  auto t = parse("SIGSTOP@device");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->signal, SIGSTOP);
  EXPECT_EQ(t->phase, "device");
  EXPECT_EQ(t->iteration, 0);
  EXPECT_EQ(t->rank, -1);
}

TEST(TestHook, IterationAndRank) {
  auto t = parse("KILL@all-reduce#3:2");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->signal, SIGKILL);
  EXPECT_EQ(t->phase, "all-reduce");
  EXPECT_EQ(t->iteration, 3);
  EXPECT_EQ(t->rank, 2);
  t = parse("SIGTERM@barrier:0");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->rank, 0);
}

TEST(TestHook, BadValuesAreRejectedNotGuessed) {
  for (const char* bad :
       {"", "SIGSTOP", "@device", "SIGFOO@device", "SIGSTOP@", "SIGSTOP@memory",
        "SIGSTOP@device#1", "SIGKILL@all-reduce#0", "SIGKILL@all-reduce#", "SIGKILL@all-reduce#x",
        "SIGKILL@all-reduce#2:", "SIGKILL@all-reduce:-1", "SIGKILL@all-reduce:1x",
        "SIGKILL@all-reduce#99999999999", "sigkill@device", "SIGKILL@Device", " SIGKILL@device",
        "SIGKILL@device:1:2"})
    EXPECT_FALSE(parse(bad)) << bad;
}

TEST(TestHook, FlipIsTheComputePhasesAndFiresNoSignal) {
  auto t = parse("FLIP@compute:2");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->signal, TestRaise::kFlip);
  EXPECT_EQ(t->phase, "compute");
  EXPECT_EQ(t->rank, 2);
  for (const char* bad : {"FLIP@device", "FLIP@all-reduce#1", "SIGFLIP@device", "flip@compute"})
    EXPECT_FALSE(parse(bad)) << bad;
  EXPECT_TRUE(parse("SIGKILL@compute:1"));  // a signal at the compute phase, as at any other
  // Only its rank flips; entering the phase sends nothing (this binary lives on).
  const auto hook = TestHook::from_env(env_with("FLIP@compute:2"), 2);
  hook.on_phase("compute");
  EXPECT_TRUE(hook.flips("compute"));
  EXPECT_FALSE(hook.flips("device"));
  EXPECT_FALSE(TestHook::from_env(env_with("FLIP@compute:2"), 1).flips("compute"));
  EXPECT_FALSE(TestHook::from_env(env_with("SIGSTOP@compute:2"), 2).flips("compute"));
}

TEST(TestHook, BadOrOtherRanksValueNeverFires) {
  // A hook that would fire would stop this test binary: these must not.
  TestHook::from_env(env_with("SIGKILL@nowhere"), 0).on_phase("nowhere");
  auto other = TestHook::from_env(env_with("SIGKILL@device:1"), 0);
  other.on_phase("device");
  auto later = TestHook::from_env(env_with("SIGKILL@all-reduce#2"), 0);
  later.on_phase("all-reduce");
  later.on_iteration("all-reduce", 1);
  TestHook::from_env(Env{}, 0).on_phase("device");
}

TEST(TestHook, FiresOnItsPhase) {
  // SIGINT with an ignoring handler proves the signal is sent, harmlessly.
  static volatile std::sig_atomic_t got = 0;
  auto old = std::signal(SIGINT, [](int) { got = 1; });
  auto hook = TestHook::from_env(env_with("SIGINT@all-reduce#2:5"), 5);
  hook.on_phase("all-reduce");
  EXPECT_EQ(got, 0);
  hook.on_iteration("all-reduce", 2);
  EXPECT_EQ(got, 1);
  std::signal(SIGINT, old);
}

}  // namespace
}  // namespace gpudiag
