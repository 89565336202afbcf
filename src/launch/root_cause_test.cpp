// The cause among a node's failed ranks (root_cause.h), from error files as
// torch's @record writes them: a first failure that is a peer's failure seen
// from here gives way to the rank that raised on its own; a first failure of
// its own, or one with no other candidate, stays the cause.
#include "launch/root_cause.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace gpudiag::launch {
namespace {

struct ErrorDir {
  std::string dir;
  ErrorDir() {
    char t[] = "/tmp/gpudiag-root-cause-XXXXXX";
    EXPECT_NE(::mkdtemp(t), nullptr);
    dir = t;
  }
  ~ErrorDir() { std::filesystem::remove_all(dir); }
  void write(int local, const std::string& message, long timestamp) {
    std::filesystem::create_directories(dir + "/" + std::to_string(local));
    nlohmann::json doc = {
        {"message",
         {{"message", message},
          {"extraInfo",
           {{"py_callstack", "Traceback (most recent call last):\n  File \"/u/train.py\", line 9, "
                             "in main\n" + message + "\n"},
            {"timestamp", std::to_string(timestamp)}}}}}};
    std::ofstream(dir + "/" + std::to_string(local) + "/error.json") << doc.dump();
  }
};

std::vector<RankOutcome> failed(int n) {
  std::vector<RankOutcome> out(n);
  for (int i = 0; i < n; ++i) out[i] = {i, ExitStatus::exited(1), false, false, false, ""};
  return out;
}

constexpr const char* kGlooClosed =
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
    "peer [127.0.0.1]:29412";

TEST(RootCause, APeersFailureSeenFirstGivesWayToTheRankThatRaised) {
  ErrorDir d;
  d.write(0, kGlooClosed, 1764100001);  // exited first: rank 1's death, seen by rank 0
  d.write(1, "ValueError: step 2 went wrong on rank 1", 1764100000);
  const auto c = root_cause(0, failed(2), d.dir);
  EXPECT_EQ(c.local, 1);
  EXPECT_EQ(c.first_words, kGlooClosed);
}

TEST(RootCause, AFirstFailureOfItsOwnStaysTheCause) {
  ErrorDir d;
  d.write(0, "ValueError: bad batch", 1764100001);
  d.write(1, kGlooClosed, 1764100000);
  EXPECT_EQ(root_cause(0, failed(2), d.dir).local, 0);
  // Every rank saw only a peer's failure (the cause is on another node):
  // the first stays named.
  ErrorDir e;
  e.write(0, kGlooClosed, 1764100000);
  e.write(1, "torch.distributed.DistBackendError: NCCL error: remote process exited", 1764100000);
  EXPECT_EQ(root_cause(0, failed(2), e.dir).local, 0);
}

TEST(RootCause, RanksTheLauncherKilledOrThatWroteNoFileAreNotCandidates) {
  ErrorDir d;
  d.write(2, kGlooClosed, 1764100002);
  d.write(0, "ValueError: raised while being stopped", 1764100001);
  auto o = failed(3);
  o[0].killed_by_launcher = true;
  o[1].status = ExitStatus::exited(1);  // no error file
  EXPECT_EQ(root_cause(2, o, d.dir).local, 2);
  // Of several that raised on their own, the earliest file.
  ErrorDir e;
  e.write(0, kGlooClosed, 1764100005);
  e.write(1, "KeyError: 'late'", 1764100004);
  e.write(2, "ValueError: early", 1764100002);
  EXPECT_EQ(root_cause(0, failed(3), e.dir).local, 2);
}

TEST(RootCause, ConsequencesAreRecognisedByTheirWords) {
  for (const char* m :
       {kGlooClosed, "RuntimeError: Connection reset by peer",
        "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0",
        "RuntimeError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(...) ran "
        "for 600000 milliseconds before timing out.",
        "torch.distributed.DistNetworkError: failed to recv, got 0 bytes"})
    EXPECT_TRUE(consequence_of_a_peer(m)) << m;
  for (const char* m : {"ValueError: step 2 went wrong on rank 1", "KeyError: 'X'",
                        "torch.cuda.OutOfMemoryError: CUDA out of memory"})
    EXPECT_FALSE(consequence_of_a_peer(m)) << m;
}

}  // namespace
}  // namespace gpudiag::launch
