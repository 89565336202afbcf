// StorePlane over a real TcpStoreServer on 127.0.0.1: a checkpoint that a
// rank's launcher reported dead does not wait for that rank.
#include "rendezvous/store_plane.h"

#include <gtest/gtest.h>

#include <future>

#include "rendezvous/tcp_store_client.h"
#include "rendezvous/tcp_store_server.h"

namespace gpudiag {
namespace {

using Clock = std::chrono::steady_clock;

TEST(StorePlane, ACheckpointStopsWaitingForARankReportedDead) {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = "job";
  TcpStoreServer server(o);
  auto client = [&] {
    return std::make_unique<TcpStoreClient>("127.0.0.1", server.port(), "job",
                                            Deadline::after_seconds(5));
  };
  auto plane = [&](int rank) {
    return make_store_plane(client(), {rank, 3, rank, "node", 100 + rank},
                            Deadline::after_seconds(5));
  };
  auto p0 = plane(0), p1 = plane(1);
  // Rank 2 never arrives: its launcher saw it die.
  auto launcher = client();
  publish_failure(*launcher, "rank 2 [node-2] (pid 102) was killed by SIGKILL",
                  Deadline::after_seconds(5), FailureKind::died, 2);
  const auto t0 = Clock::now();
  auto g1 = std::async(std::launch::async, [&] {
    return p1->gather_all("all-reduce", "r1", Deadline::after_seconds(30), {0, 1, 2});
  });
  auto g0 = p0->gather_all("all-reduce", "r0", Deadline::after_seconds(30), {0, 1, 2});
  auto other = g1.get();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& g : {g0, other}) {
    EXPECT_EQ(g.records[0], "r0");
    EXPECT_EQ(g.records[1], "r1");
    EXPECT_FALSE(g.records[2]);
    ASSERT_TRUE(g.aborted);
    EXPECT_NE(g.aborted->find("rank 2 [node-2] (pid 102) was killed"), std::string::npos);
  }
  // Without the mark it would wait out the 2 s grace given to stragglers.
  EXPECT_LT(took, 1.5);
}

}  // namespace
}  // namespace gpudiag
