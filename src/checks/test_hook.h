// A test-only hook: lets an integration test make one rank stop or die at an
// exact point of the check, instead of guessing the moment with a sleep.
//
//   GPUDIAG_TEST_RAISE=SIGNAL@PHASE[#N][:RANK]
//
//   SIGNAL  SIGSTOP, SIGKILL, SIGTERM, SIGINT, SIGABRT or SIGSEGV ("SIG" optional),
//           or HANG: the thread blocks for ever there, as a call that cannot be
//           given a deadline would (cudaFree on a hung GPU, an NCCL abort that
//           never returns); only a watchdog ends the rank then;
//           or FLIP (compute only): no signal, one bit of every GEMM result
//           the rank computes is flipped before its checksum, as a GPU that
//           computes wrong would (compute/math.h's kFlipBit)
//   PHASE   device, compute, exchange, communicator, all-reduce, sweep, links, hardware
//           (the second read of the node's hardware evidence, just before the
//           barrier; in gpudiag sweep, after its last round) or barrier: the signal is raised as the rank enters the phase,
//           after it has published the phase to its peers (so "last phase:
//           PHASE" is what the others report); pool-round is gpudiag sweep's
//           (with #N)
//   #N      all-reduce: raise at the start of the N-th timed iteration
//           (1-based) instead, i.e. inside the all-reduce, while the other
//           ranks are in the same collective; needs --iters >= N.
//           pool-round: at gpudiag sweep's round N, after the rank has read
//           its partner's address and before it measures, so the partner is
//           inside the pair's exchange
//   :RANK   only the rank with this global rank raises; without it every rank
//           whose environment holds the variable does (under gpudiag launch
//           every rank inherits it, so give :RANK there)
//
// The rank sends the signal to its own process with kill(2). A value that does
// not parse is ignored with one warning; it never stops a check. Nothing
// else reads this variable, and an unset variable costs one lookup.
#pragma once

#include <optional>
#include <string>

#include "util/env.h"

namespace gpudiag {

struct TestRaise {
  static constexpr int kHang = -1;  ///< not a signal: block for ever
  static constexpr int kFlip = -2;  ///< not a signal: flip a bit of the compute result
  int signal = 0;
  std::string phase;
  int iteration = 0;  ///< 0: on entering the phase; N: at its N-th timed iteration
  int rank = -1;      ///< -1: any rank
};

/// Parses a GPUDIAG_TEST_RAISE value; nullopt and `error` set when it is bad.
std::optional<TestRaise> parse_test_raise(const std::string& value, std::string& error);

class TestHook {
 public:
  TestHook() = default;
  /// Reads GPUDIAG_TEST_RAISE for rank `rank`; warns once about a bad value.
  static TestHook from_env(const Env& env, int rank);

  /// Called as the rank enters `phase`.
  void on_phase(const std::string& phase) const { fire(phase, 0); }
  /// Called at the start of the `n`-th (1-based) timed iteration of `phase`.
  void on_iteration(const std::string& phase, int n) const { fire(phase, n); }
  /// Whether FLIP@`phase` applies to this rank.
  bool flips(const std::string& phase) const {
    return raise_ && raise_->signal == TestRaise::kFlip && raise_->phase == phase;
  }

 private:
  void fire(const std::string& phase, int iteration) const;
  std::optional<TestRaise> raise_;
};

}  // namespace gpudiag
