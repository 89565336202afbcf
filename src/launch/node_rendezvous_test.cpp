// The launchers' rendezvous: the pure parts (views, disagreements, node rank
// assignment) and whole rounds of launchers, each on its own thread with its
// own client, against a real TcpStoreServer on 127.0.0.1.
#include "launch/node_rendezvous.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag::launch {
namespace {

NodeView view(std::string host, int nproc, int lo, int hi, int rank = -1) {
  return {std::move(host), 100, nproc, lo, hi, rank};
}

TEST(NodeViews, RoundTripAndRejectForeignText) {
  auto v = view("node7", 8, 1, 4, 2);
  auto back = decode_view(encode_view(v));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->host, "node7");
  EXPECT_EQ(back->nproc, 8);
  EXPECT_EQ(back->min_nodes, 1);
  EXPECT_EQ(back->max_nodes, 4);
  EXPECT_EQ(back->node_rank, 2);
  EXPECT_FALSE(decode_view("hello"));
  EXPECT_FALSE(decode_view(encode_view(v) + " extra"));
  EXPECT_FALSE(decode_view("gpudiag-node/1 h 1 0 1 1 -1"));  // nproc 0
}

TEST(NodeViews, DisagreementsNameBothValuesAndHosts) {
  EXPECT_FALSE(disagreement({view("a", 2, 2, 2), view("b", 2, 2, 2)}));
  auto why = disagreement({view("a", 2, 2, 2), view("b", 3, 2, 2)});
  ASSERT_TRUE(why);
  EXPECT_EQ(*why,
            "launch: the nodes disagree on --nproc-per-node: 2 on a (launcher pid 100), 3 on b "
            "(launcher pid 100); try: give every node the same --nproc-per-node");
  why = disagreement({view("a", 2, 2, 2), view("b", 2, 2, 2), view("c", 2, 1, 3)});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("--nnodes: 2 on a (launcher pid 100), 1:3 on c"), std::string::npos);
}

TEST(NodeViews, RanksAreAssignedAroundTheGivenOnes) {
  EXPECT_EQ(assign_node_ranks({view("a", 1, 3, 3), view("b", 1, 3, 3), view("c", 1, 3, 3)}),
            (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(assign_node_ranks({view("a", 1, 3, 3), view("b", 1, 3, 3, 0), view("c", 1, 3, 3)}),
            (std::vector<int>{1, 0, 2}));
  try {
    assign_node_ranks({view("a", 1, 2, 2, 1), view("b", 1, 2, 2, 1)});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(e.one_line().find("two nodes claim --node-rank 1: a (launcher pid 100) and b"),
              std::string::npos);
  }
  EXPECT_THROW(assign_node_ranks({view("a", 1, 2, 2, 5), view("b", 1, 2, 2)}), UsageError);
}

// The launcher serving the rendezvous takes node 0 however late it arrives,
// unless a node claimed 0 by hand; its flag survives the round trip.
TEST(NodeViews, TheEndpointsNodeIsNodeZero) {
  auto host = view("endpoint", 1, 3, 3);
  host.serves = true;
  auto back = decode_view(encode_view(host));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->serves);
  EXPECT_FALSE(decode_view(encode_view(view("a", 1, 3, 3))).value().serves);
  EXPECT_FALSE(decode_view(encode_view(host) + " serves"));
  EXPECT_EQ(assign_node_ranks({view("a", 1, 3, 3), view("b", 1, 3, 3), host}),
            (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(assign_node_ranks({view("a", 1, 3, 3, 0), view("b", 1, 3, 3), host}),
            (std::vector<int>{0, 1, 2}));  // then arrival order, as before
}

struct Round {
  TcpStoreServer server{[] {
    TcpStoreServerOptions o;
    o.bind_host = "127.0.0.1";
    o.token = "t";
    return o;
  }()};

  std::future<Membership> join(NodeView v, RendezvousTimes times = {5, 0.5}) {
    return std::async(std::launch::async, [this, v, times] {
      TcpStoreClient c("127.0.0.1", server.port(), "t", Deadline::after_seconds(5));
      return meet_nodes(c, v, times, "test");
    });
  }
};

TEST(NodeRendezvous, FixedCountGetsDistinctRanks) {
  Round round;
  auto a = round.join(view("a", 2, 2, 2));
  auto b = round.join(view("b", 2, 2, 2));
  auto ma = a.get(), mb = b.get();
  EXPECT_EQ(ma.nnodes, 2);
  EXPECT_EQ(mb.nnodes, 2);
  EXPECT_NE(ma.node_rank, mb.node_rank);
  EXPECT_EQ(ma.node_rank + mb.node_rank, 1);
}

TEST(NodeRendezvous, ElasticRangeTakesWhoCameWithinTheLastCall) {
  Round round;
  auto a = round.join(view("a", 1, 1, 3), {5, 2});
  auto b = round.join(view("b", 1, 1, 3), {5, 2});
  EXPECT_EQ(a.get().nnodes, 2);
  EXPECT_EQ(b.get().nnodes, 2);
}

TEST(NodeRendezvous, EveryNodeHearsOfADisagreement) {
  Round round;
  auto a = round.join(view("a", 2, 2, 2));
  auto b = round.join(view("b", 3, 2, 2));
  for (auto* f : {&a, &b}) {
    try {
      f->get();
      ADD_FAILURE() << "no disagreement reported";
    } catch (const UsageError& e) {
      EXPECT_NE(e.one_line().find("disagree on --nproc-per-node"), std::string::npos);
    }
  }
}

TEST(NodeRendezvous, MissingNodesTimeOutNamingWhoCame) {
  Round round;
  auto a = round.join(view("a", 1, 2, 2), {0.3, 0.1});
  try {
    a.get();
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(e.one_line().find("only 1 of 2 nodes joined the rendezvous at test"),
              std::string::npos);
    EXPECT_NE(e.one_line().find("a (launcher pid 100)"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpudiag::launch
