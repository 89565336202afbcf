// The NCCL contract, third part: ncclCommInitRankScalable, a communicator
// started from several bootstrap roots (comm/nccl_roots.h says when gpudiag's
// check uses it). Like the other parts (nccl_contract_test.cpp,
// nccl_contract_lifecycle_test.cpp) it runs against the model here and
// against real NCCL on a GPU (GPUDIAG_NCCL_CONTRACT=real, scripts/gpu-check.sh
// at 1 and 4 ranks); where they disagree, the model is wrong. Each test names
// the NCCL source it states (tag v2.28.9-1 unless another is named). The ids
// of a test are made by the ranks NCCL's guide names for them
// (ContractSubject::unique_ids), as the check makes them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "comm/nccl_contract_fixture.h"

namespace gpudiag {
namespace nccl_contract_scalable_test {  // named: the unity build puts this folder's tests in one unit

using nccl_abi::Result;
constexpr std::size_t kSmall = NcclContract::kSmall;

// In the test's body: GTEST_SKIP returns from the function it is in.
#define NEED_SCALABLE()                                                                  \
  if (!n->CommInitRankScalable)                                                          \
  GTEST_SKIP() << "NCCL " << version() << " has no ncclCommInitRankScalable (from 2.23)"

class NcclContractScalable : public NcclContract {
 protected:
  /// A non-blocking ncclCommInitRankScalable from `ids` (nId = their count
  /// unless `nid` says otherwise); the handle, if any, is the fixture's to abort.
  Result start_scalable(nccl_abi::CommHandle& c, std::vector<nccl_abi::UniqueId>& ids,
                        std::optional<int> nid = std::nullopt) {
    nccl_abi::Config cfg;
    cfg.blocking = 0;
    c = nullptr;
    const Result r = n->CommInitRankScalable(
        &c, s->size(), s->rank(), nid.value_or(static_cast<int>(ids.size())), ids.data(), &cfg);
    if (c) comms.push_back(c);
    return r;
  }
  std::string last() const { return n->GetLastError(nullptr); }
};

// src/nccl.h.in: ncclCommInitRankScalable arrived in NCCL 2.23 (v2.23.4-1's
// "Add scalable init API"); gpudiag's loader binds it only where it exists
// (comm/nccl_loader.cpp) and starts from one root without it.
TEST_P(NcclContractScalable, ScalableInitExistsFromNccl2_23) {
  EXPECT_EQ(n->CommInitRankScalable != nullptr, version() >= nccl_abi::kScalableVersion)
      << "NCCL " << version();
}

// src/init.cc ncclCommInitRankScalable -> ncclCommInitRankDev, then
// src/bootstrap.cc bootstrapInit: the ranks split between nId roots in
// blocks (rootIdFromRank), each checking in with its own root, the first
// rank of a root also with the previous one. A non-blocking init returns
// ncclInProgress (or ncclSuccess if done) and is polled to ncclSuccess, with
// nId = 1, one root per rank, and (at 4 ranks) an uneven split (2, 1, 1);
// the communicator then runs collectives as any other.
TEST_P(NcclContractScalable, InitFromSeveralRootsIsPolledToSuccess) {
  NEED_SCALABLE();
  std::vector<int> nids{1};
  if (s->size() >= 2) nids.push_back(s->size());
  if (s->size() == 4) nids.push_back(3);
  for (int nid : nids) {
    SCOPED_TRACE("nId " + std::to_string(nid));
    auto ids = s->unique_ids(key("_" + std::to_string(nid)), nid);
    nccl_abi::CommHandle c = nullptr;
    const Result r = start_scalable(c, ids);
    ASSERT_TRUE(r == nccl_abi::kInProgress || r == nccl_abi::kSuccess) << r << ": " << last();
    ASSERT_EQ(settle(c), nccl_abi::kSuccess) << last();
    void* buf = s->device(kSmall);
    const Result a = all_reduce(c, buf, kSmall);
    ASSERT_TRUE(a == nccl_abi::kInProgress || a == nccl_abi::kSuccess) << a;
    ASSERT_EQ(settle(c), nccl_abi::kSuccess) << last();
    drain();
    finish(c);
  }
}

// src/init.cc ncclCommInitRankDev: "if (nId <= 0 || nId > nranks)" WARNs
// "improper usage of ncclCommInitRank: nId = .., nranks=.." and returns
// ncclInvalidArgument before anything else (no communicator, no bootstrap);
// ncclCommInitRankScalable's group closes with that error, leaving none open.
TEST_P(NcclContractScalable, NIdOutsideOneToNranksIsRefused) {
  NEED_SCALABLE();
  for (int nid : {0, -1, s->size() + 1}) {
    SCOPED_TRACE("nId " + std::to_string(nid));
    std::vector<nccl_abi::UniqueId> ids(static_cast<std::size_t>(s->size() + 1));
    nccl_abi::CommHandle c = nullptr;
    EXPECT_EQ(start_scalable(c, ids, nid), nccl_abi::kInvalidArgument);
    EXPECT_EQ(c, nullptr);
    EXPECT_NE(last().find("improper usage of ncclCommInitRank: nId = " + std::to_string(nid)),
              std::string::npos)
        << last();
    EXPECT_EQ(n->GroupEnd(), nccl_abi::kInvalidUsage) << "a group was left open";
  }
}

// src/nccl.h.in: "The number of ncclUniqueIds and their order must be the
// same for every rank", which no rank can check. Ranks given the ids in
// another order check in with roots that count them otherwise
// (src/bootstrap.cc bootstrapRoot: "mismatch in info from procs", or a root
// waiting for a rank that went elsewhere): the init stays pending, never
// fails on its own, and ncclCommAbort ends it (gpudiag's timeout path).
TEST_P(NcclContractScalable, IdsInAnotherOrderOnSomeRanksNeverComplete) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_SCALABLE();
  auto ids = s->unique_ids(key(), 2);
  std::vector<nccl_abi::UniqueId> reversed(ids.rbegin(), ids.rend());
  s->peers_use_ids(reversed);  // the model's other ranks; real ranks 1.. pass them below
  auto& mine = s->rank() == 0 ? ids : reversed;
  nccl_abi::CommHandle c = nullptr;
  const Result r = start_scalable(c, mine);
  EXPECT_EQ(r, nccl_abi::kInProgress) << last();
  EXPECT_EQ(settle(c, s->real() ? 3.0 : 0.05), nccl_abi::kInProgress);
  abort_in_time(c);
}

// src/init.cc ncclCommInitRankDev: with NCCL_COMM_ID set, rank 0 alone drops
// to the first id ("NCCL_COMM_ID cannot be used with more than one
// ncclUniqueId", an INFO) and starts the root at that address, while
// ncclGetUniqueId gave every id that address (src/bootstrap.cc
// bootstrapGetUniqueId): rank 0 and the others count roots differently and
// the init never completes. gpudiag starts from one root when NCCL_COMM_ID is
// set (comm/nccl_roots.h). On real NCCL: a process started with it, 2+ ranks.
TEST_P(NcclContractScalable, CommIdWithSeveralIdsNeverCompletes) {
  if (!with_env({{"NCCL_COMM_ID", "127.0.0.1:29519"}}))
    GTEST_SKIP() << "real NCCL reads NCCL_COMM_ID from this process: start it with "
                    "NCCL_COMM_ID=127.0.0.1:29519";
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_SCALABLE();
  auto ids = s->unique_ids(key(), 2);
  EXPECT_EQ(std::memcmp(ids[0].internal, ids[1].internal, sizeof ids[0].internal), 0)
      << "every id is NCCL_COMM_ID's address";
  nccl_abi::CommHandle c = nullptr;
  const Result r = start_scalable(c, ids);
  EXPECT_EQ(r, nccl_abi::kInProgress) << last();
  EXPECT_EQ(settle(c, s->real() ? 3.0 : 0.05), nccl_abi::kInProgress);
  abort_in_time(c);
}

INSTANTIATE_TEST_SUITE_P(Nccl, NcclContractScalable, ::testing::ValuesIn(contract_params()),
                         [](const auto& info) { return info.param.name; });

// Where no GPU is lent (this run), the rules above ran against the model
// only: said here as a skip, so the run shows what it did not check.
TEST(NcclContractScalableOnRealNccl, RunsWhereAGpuIs) {
  const char* which = std::getenv("GPUDIAG_NCCL_CONTRACT");
  if (!which || std::strcmp(which, "real") != 0)
    GTEST_SKIP() << "no real NCCL in this run: ncclCommInitRankScalable's contract ran against "
                    "the model; scripts/gpu-check.sh runs it against real NCCL "
                    "(GPUDIAG_NCCL_CONTRACT=real) at 1 and 4 ranks on a GPU";
  SUCCEED() << "NcclContractScalable ran against real NCCL (the suite above, 'real')";
}

}  // namespace
}  // namespace gpudiag
