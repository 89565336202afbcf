#include "comm/tcp_ring.h"
#include "comm/tcp_ring_testing.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "checks/verify.h"
#include "util/error.h"

namespace gpudiag {
namespace {

using testing_ring::on_ring;

/// Runs an all-reduce of `count` floats over `n` ring members in threads of
/// this process, over real loopback sockets; returns every rank's result.
std::vector<std::vector<float>> ring_all_reduce(int n, std::size_t count) {
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  on_ring(n, [&](Communicator& ring, int r) {
    auto deadline = Deadline::after(std::chrono::seconds(30));
    fill_contribution(data[r].data(), count, r);
    ring.all_reduce_sum(data[r].data(), count, deadline);
    ring.barrier(deadline);
  });
  return data;
}

class RingSizes : public ::testing::TestWithParam<std::pair<int, std::size_t>> {};

TEST_P(RingSizes, SumIsExactOnEveryRank) {
  auto [n, count] = GetParam();
  auto results = ring_all_reduce(n, count);
  ExpectedSum expected(n);
  for (int r = 0; r < n; ++r) {
    auto m = verify_sum(results[r].data(), count, expected);
    EXPECT_FALSE(m) << "rank " << r << ": " << m->count << " wrong, first at " << m->first_index;
  }
}

// Sizes that do and do not divide by n, smaller than n, and a few MiB.
INSTANTIATE_TEST_SUITE_P(
    Ring, RingSizes,
    ::testing::Values(std::pair{2, std::size_t{1}}, std::pair{3, std::size_t{2}},
                      std::pair{2, std::size_t{1000}}, std::pair{5, std::size_t{12345}},
                      std::pair{4, std::size_t{1} << 20}, std::pair{8, std::size_t{100003}},
                      std::pair{4, std::size_t{5} << 20}));  // ring, not halving

TEST(Ring, AllGatherPutsEveryRanksSlotEverywhere) {
  const int n = 5;
  const std::size_t per = 3001;
  std::vector<std::vector<float>> data(n, std::vector<float>(per * n, -1.0f));
  on_ring(n, [&](Communicator& ring, int r) {
    fill_contribution(data[r].data() + r * per, per, r);
    ring.all_gather(data[r].data(), per, Deadline::after(std::chrono::seconds(30)));
  });
  for (int r = 0; r < n; ++r)
    for (int slot = 0; slot < n; ++slot)
      for (std::size_t i = 0; i < per; ++i)
        ASSERT_EQ(data[r][slot * per + i], contribution(slot, i)) << r << " " << slot << " " << i;
}

TEST(Ring, BroadcastFromEveryRoot) {
  const int n = 4;
  const std::size_t count = 300001;  // several pipeline chunks, the last one partial
  for (int root = 0; root < n; ++root) {
    std::vector<std::vector<float>> data(n, std::vector<float>(count, 0.0f));
    fill_contribution(data[root].data(), count, root);
    on_ring(n, [&](Communicator& ring, int r) {
      ring.broadcast(data[r].data(), count, root, Deadline::after(std::chrono::seconds(30)));
    });
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count; i += 97)
        ASSERT_EQ(data[r][i], contribution(root, i)) << "root " << root << " rank " << r;
  }
}

TEST(Ring, SendRecvReachesEveryPeerOverTheMesh) {
  const int n = 5;
  const std::size_t count = 70001;
  // got[r][p]: what rank r received from rank p.
  std::vector<std::vector<std::vector<float>>> got(n, std::vector<std::vector<float>>(n));
  on_ring(n, [&](Communicator& ring, int r) {
    auto deadline = Deadline::after(std::chrono::seconds(30));
    ring.open_links(deadline);
    std::vector<float> mine(count);
    fill_contribution(mine.data(), count, r);
    // Every rank walks its peers in an order that pairs up: (r + p) % n fixed per step.
    for (int step = 0; step < n; ++step) {
      int p = ((step - r) % n + n) % n;
      if (p == r) continue;
      got[r][p].resize(count);
      ring.send_recv(p, mine.data(), got[r][p].data(), count, deadline);
    }
  });
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      ASSERT_EQ(got[r][p].size(), count);
      for (std::size_t i = 0; i < count; i += 101)
        ASSERT_EQ(got[r][p][i], contribution(p, i)) << "rank " << r << " from " << p;
    }
}

TEST(Ring, WrongTokenNeverConnectsAndTimesOutNamingTheNeighbour) {
  RingListener a, b;
  RingPeers pa{0,
               {"127.0.0.1:" + std::to_string(a.port()), "127.0.0.1:" + std::to_string(b.port())},
               {"rank 0 [x-0]", "rank 1 [x-1]"},
               "job-a"};
  RingPeers pb = pa;
  pb.rank = 1;
  pb.token = "job-b";
  auto deadline = Deadline::after(std::chrono::seconds(2));
  auto fa = std::async(std::launch::async, [&] { return make_tcp_ring(a, pa, deadline); });
  auto fb = std::async(std::launch::async, [&] { return make_tcp_ring(b, pb, deadline); });
  try {
    fa.get();
    FAIL() << "rank 0 accepted a neighbour of another job";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 [x-1] never connected"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fb.get(), TimeoutError);
}

TEST(Ring, DeadNeighbourIsNamed) {
  RingListener a, b;
  RingPeers pa{0,
               {"127.0.0.1:" + std::to_string(a.port()), "127.0.0.1:" + std::to_string(b.port())},
               {"rank 0 [x-0]", "rank 1 [x-1]"},
               "t"};
  RingPeers pb = pa;
  pb.rank = 1;
  auto deadline = Deadline::after(std::chrono::seconds(10));
  auto fb = std::async(std::launch::async, [&] { return make_tcp_ring(b, pb, deadline); });
  auto ra = make_tcp_ring(a, pa, deadline);
  fb.get().reset();  // rank 1 goes away
  std::vector<float> v(1 << 16, 1.0f);
  try {
    ra->all_reduce_sum(v.data(), v.size(), deadline);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 [x-1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpudiag
