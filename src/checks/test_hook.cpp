// GPUDIAG_TEST_RAISE (test_hook.h): a strict parser, and kill(2) on ourselves.
#include "checks/test_hook.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <charconv>
#include <thread>

namespace gpudiag {

namespace {

constexpr struct {
  const char* name;
  int number;
} kSignals[] = {{"STOP", SIGSTOP}, {"KILL", SIGKILL}, {"TERM", SIGTERM},
                {"INT", SIGINT},   {"ABRT", SIGABRT}, {"SEGV", SIGSEGV},
                {"HANG", TestRaise::kHang}, {"FLIP", TestRaise::kFlip}};

constexpr const char* kHookPhases[] = {"device", "compute", "exchange", "communicator", "all-reduce", "sweep",
                                       "links",  "barrier",  "hardware",     "pool-round"};

/// A whole non-negative decimal number up to `max`, nothing else.
std::optional<int> whole_number(const std::string& s, int max) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max)
    return std::nullopt;
  return v;
}

}  // namespace

std::optional<TestRaise> parse_test_raise(const std::string& value, std::string& error) {
  TestRaise t;
  const auto at = value.find('@');
  if (at == std::string::npos) {
    error = "expected SIGNAL@PHASE[#N][:RANK]";
    return std::nullopt;
  }
  std::string sig = value.substr(0, at), rest = value.substr(at + 1);
  if (sig.rfind("SIG", 0) == 0 && sig != "HANG") sig = sig.substr(3);
  for (const auto& s : kSignals)
    if (sig == s.name) t.signal = s.number;
  if (!t.signal) {
    error = "unknown signal '" + value.substr(0, at) +
            "' (SIGSTOP, SIGKILL, SIGTERM, SIGINT, SIGABRT, SIGSEGV, HANG, FLIP)";
    return std::nullopt;
  }
  if (auto colon = rest.find(':'); colon != std::string::npos) {
    auto rank = whole_number(rest.substr(colon + 1), 1 << 24);
    if (!rank) {
      error = "bad rank '" + rest.substr(colon + 1) + "' after ':'";
      return std::nullopt;
    }
    t.rank = *rank;
    rest.resize(colon);
  }
  if (auto hash = rest.find('#'); hash != std::string::npos) {
    auto n = whole_number(rest.substr(hash + 1), 1000000);
    if (!n || *n < 1) {
      error = "bad iteration '" + rest.substr(hash + 1) + "' after '#' (1, 2, ...)";
      return std::nullopt;
    }
    t.iteration = *n;
    rest.resize(hash);
  }
  for (const char* p : kHookPhases)
    if (rest == p) t.phase = p;
  if (t.phase.empty()) {
    error = "unknown phase '" + rest +
            "' (device, compute, exchange, communicator, all-reduce, sweep, links, barrier, "
            "hardware, pool-round)";
    return std::nullopt;
  }
  if (t.iteration && t.phase != "all-reduce" && t.phase != "pool-round") {
    error = "#N only applies to the all-reduce's timed iterations and gpudiag sweep's rounds";
    return std::nullopt;
  }
  if (t.signal == TestRaise::kFlip && t.phase != "compute") {
    error = "FLIP only applies to the compute phase (FLIP@compute[:RANK])";
    return std::nullopt;
  }
  if (t.signal == TestRaise::kFlip && t.iteration) {
    error = "FLIP takes no #N: it flips every repetition's result";
    return std::nullopt;
  }
  return t;
}

TestHook TestHook::from_env(const Env& env, int rank) {
  TestHook hook;
  auto value = env.get("GPUDIAG_TEST_RAISE");
  if (!value) return hook;
  std::string error;
  auto t = parse_test_raise(*value, error);
  if (!t) {
    spdlog::warn("ignoring GPUDIAG_TEST_RAISE={}: {}", *value, error);
    return hook;
  }
  if (t->rank < 0 || t->rank == rank) hook.raise_ = t;
  return hook;
}

void TestHook::fire(const std::string& phase, int iteration) const {
  if (!raise_ || raise_->phase != phase || raise_->iteration != iteration) return;
  if (raise_->signal == TestRaise::kFlip) return;  // flips(): the compute phase asks
  const std::string where = phase + (iteration ? " #" + std::to_string(iteration) : "");
  if (raise_->signal == TestRaise::kHang) {
    spdlog::warn("GPUDIAG_TEST_RAISE: hanging in {} (a call that never returns)", where);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  spdlog::warn("GPUDIAG_TEST_RAISE: raising signal {} in {}", raise_->signal, where);
  ::kill(::getpid(), raise_->signal);
}

}  // namespace gpudiag
