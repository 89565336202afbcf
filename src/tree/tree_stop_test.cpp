// A node whose judge stops (its parent gone and nothing above it to report
// to): the judge says so in the node's store, and the node's ranks end that
// checkpoint and every later one at once with the reason, instead of waiting
// out each checkpoint's deadline for a digest that cannot come.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "plane/store_plane.h"
#include "store/memory_store.h"
#include "tree/gone_store_test.h"
#include "tree/relay.h"

namespace gpudiag {
namespace {

using Clock = std::chrono::steady_clock;

TEST(TreeStop, ANodesRanksStopWaitingOnceItsJudgeStopped) {
  const TreeLayout L{4, 2, 2};  // two nodes of two ranks; node 0 is ours
  MemoryStore node("node0");
  GoneStore gone;  // the judge above, gone, and nothing beyond it
  StoreView below(node);
  RelayOptions o;
  o.level = RelayLevel::node;
  o.index = 0;
  o.layout = L;
  o.timeout = std::chrono::milliseconds(300);
  o.digest_grace = std::chrono::milliseconds(2000);
  o.below = &below;
  o.above = &gone;
  Relay relay(o);
  std::thread judge([&] { relay.run(std::chrono::seconds(120), {}); });

  std::vector<std::unique_ptr<Plane>> planes;
  for (int r = 0; r < 2; ++r) {
    StorePlaneIdentity id{r, L.world, r, "n0", 1000 + r};
    id.tree = true;
    id.node_first = 0;
    id.node_last = 1;
    id.judge_grace = std::chrono::milliseconds(60000);
    planes.push_back(
        make_store_plane(std::make_unique<StoreView>(node), id, Deadline::after_seconds(5)));
  }
  const auto t0 = Clock::now();
  // Without the judge's word each rank would wait its deadline and grace: 70 s.
  std::vector<Gathered> first(2), second(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      const std::string rec = "rec" + std::to_string(r);
      first[r] = planes[r]->gather_all("exchange", rec, Deadline::after_seconds(10), {}, {}, {});
      second[r] =
          planes[r]->gather_all("communicator", rec, Deadline::after_seconds(10), {}, {}, {});
    });
  for (auto& t : ranks) t.join();
  judge.join();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(first[r].aborted) << r;
    EXPECT_NE(first[r].aborted->find("this node's leader stopped judging"), std::string::npos)
        << *first[r].aborted;
    EXPECT_NE(first[r].aborted->find("lost the store at gone:1"), std::string::npos)
        << *first[r].aborted;
    EXPECT_EQ(first[r].missing, (std::vector<int>{2, 3})) << r;  // the other node's ranks
    ASSERT_TRUE(second[r].aborted) << r;
    EXPECT_EQ(*second[r].aborted, *first[r].aborted);
  }
  EXPECT_LT(took, 35.0);  // not two checkpoints' 70 s each
}

}  // namespace
}  // namespace gpudiag
