// What one node shares with the others under --stragglers: the outbox's
// value read back whole, bounded to its last batches; other nodes' hostile
// values refused or skipped line by line; and two watches of a two-node job
// exchanging through a real store, one node's clock 5 s ahead: a healthy job
// names nobody on either, a slow rank of the skewed node is named on both, by
// its node's host and local rank, and no other.
#include "stragglers/exchange.h"
#include "stragglers/share.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "store/memory_store.h"

namespace gpudiag::stragglers {

namespace share_test {

Arrival arrival(int seq, std::int64_t a) { return {0, seq, "all_reduce", a, a + 500, 0}; }

TEST(StragglerShare, TheValueReadsBackWhole) {
  Outbox box;
  box.declare({1, {0, 2}});
  box.declare({1, {1, 3}});  // the first declaration stands
  box.add(0, arrival(0, 1000));
  box.add(1, arrival(0, 1200));
  const auto s = parse_share(box.publish(1, "node-b", false), 1, 2, 4);
  ASSERT_TRUE(s);
  EXPECT_EQ((std::tuple{s->node, s->serial, s->final, s->host, s->invalid}),
            (std::tuple{1, 1, false, std::string("node-b"), 0}));
  ASSERT_EQ(s->groups.size(), 1u);
  EXPECT_EQ(s->groups[0].ranks, (std::vector<int>{0, 2}));
  ASSERT_EQ(s->batches.size(), 1u);
  ASSERT_EQ(s->batches[0].records.size(), 2u);
  EXPECT_EQ(s->batches[0].records[1].local, 1);
  EXPECT_EQ(s->batches[0].records[1].arrival.arrival_ns, 1200);
  EXPECT_EQ(s->batches[0].records[1].arrival.end_ns, 1700);
  // Nothing new: no new batch, and final once every record is shared.
  const auto again = parse_share(box.publish(1, "node-b", true), 1, 2, 4);
  ASSERT_TRUE(again);
  EXPECT_EQ((std::tuple{again->serial, again->final, again->batches.size()}),
            (std::tuple{std::int64_t{1}, true, std::size_t{1}}));
}

TEST(StragglerShare, OnlyTheLastBatchesAndBoundedBatches) {
  Outbox box;
  std::string value;
  for (int b = 0; b < 10; ++b) {
    for (int i = 0; i < 5; ++i) box.add(0, arrival(b * 5 + i, 1000 + b * 5 + i));
    value = box.publish(0, "a", false);
  }
  auto s = parse_share(value, 0, 1, 2);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->batches.size(), static_cast<std::size_t>(kKeptBatches));
  EXPECT_EQ(s->batches.front().serial, 10 - kKeptBatches + 1);
  // A burst past a batch's bound waits for the next; past the waiting bound it is lost.
  for (std::size_t i = 0; i < kMaxWaiting + 10; ++i) box.add(0, arrival(100 + static_cast<int>(i), 5000));
  EXPECT_EQ(box.lost(), 10);
  s = parse_share(box.publish(0, "a", true), 0, 1, 2);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->batches.back().records.size(), kMaxBatchRecords);
  EXPECT_FALSE(s->final);  // records still waiting
  EXPECT_LE(box.publish(0, "a", true).size(), kMaxShareBytes);
}

TEST(StragglerShare, AnotherNodesHostileValue) {
  const std::string good = "s 1 2 0 node-b\nb 1\nc 0 0 0 all_reduce 10 20 0\nb 2\nc 1 0 0 all_reduce 11 21 0\n";
  ASSERT_TRUE(parse_share(good, 1, 2, 4));
  EXPECT_EQ(parse_share(good, 1, 2, 4)->batches.size(), 2u);
  EXPECT_FALSE(parse_share(good, 0, 2, 4));                       // another node's key
  EXPECT_FALSE(parse_share("s 1 2 0 no\x1b[2Jde\n", 1, 2, 4));     // a host that is not a name
  EXPECT_FALSE(parse_share("s 1 2 0 " + std::string(65, 'h') + "\n", 1, 2, 4));
  EXPECT_FALSE(parse_share("s 1 -2 0 b\n", 1, 2, 4));
  EXPECT_FALSE(parse_share("s 1 2 7 b\n", 1, 2, 4));
  EXPECT_FALSE(parse_share("c 0 0 0 all_reduce 10 20 0\n", 1, 2, 4));  // no header
  EXPECT_FALSE(parse_share(std::string(kMaxShareBytes + 1, 's'), 1, 2, 4));
  const auto s = parse_share(
      "s 1 5 0 b\n"
      "c 0 0 0 all_reduce 10 20 0\n"       // before any batch
      "b 3\nc 2 0 0 all_reduce 10 20 0\n"  // local rank 2 of 2
      "c 0 0 1 all_reduce 30 20 0\n"       // ends before it arrives
      "c 1 0 1 all_reduce 30 40 0\n"       // kept
      "b 3\nc 0 0 2 all_reduce 50 60 0\n"  // a batch again: skipped with its records
      "b 9\n"                               // past the header's serial
      "g 1 0,9\n"                           // a member past the world
      "x what\n",
      1, 2, 4);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->batches.size(), 1u);
  ASSERT_EQ(s->batches[0].records.size(), 1u);
  EXPECT_EQ(s->batches[0].records[0].arrival.seq, 1);
  EXPECT_TRUE(s->groups.empty());
  EXPECT_EQ(s->invalid, 8);
}

/// Sends one rank's datagram to a watch's socket.
void send_to(const std::string& address, const std::string& text) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, address.data(), address.size());
  ASSERT_EQ(::sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&addr),
                     sizeof addr),
            static_cast<ssize_t>(text.size()));
  ::close(fd);
}

struct Node {
  std::string dir;
  std::unique_ptr<Watch> watch;
  std::unique_ptr<Exchange> exchange;
};

/// A two-node job of 2 ranks a node: 300 collectives 2 ms apart with 0.1 ms
/// of jitter; node 1's clock `skew` ahead; `slow` (a global rank, -1 none)
/// 2 ms late from collective 50. Returns each launcher's end summary.
std::vector<Report> two_nodes(std::int64_t skew, int slow) {
  MemoryStore store;
  std::vector<Node> nodes(2);
  for (int n = 0; n < 2; ++n) {
    nodes[n].dir = std::filesystem::temp_directory_path() /
                   ("gpudiag-share-test-" + std::to_string(::getpid()) + "-" + std::to_string(n));
    std::filesystem::create_directories(nodes[n].dir);
    const WatchSettings w{nodes[n].dir, 2, 2 * n, 4, n ? "node-b" : "node-a", "", n, 2};
    nodes[n].watch = std::make_unique<Watch>(w);
    nodes[n].exchange = std::make_unique<Exchange>(store, *nodes[n].watch,
                                                   ExchangeSettings{0, n, 2, 0.05, 3});
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 0.1);
  constexpr std::int64_t kMs = 1000000;
  std::int64_t t = 1000 * kMs;
  for (int seq = 0; seq < 300; seq += 10) {
    std::vector<std::string> text(4);
    for (int r = 0; r < 4; ++r) text[static_cast<std::size_t>(r)] = "r " + std::to_string(r % 2) + " 0\n";
    for (int k = seq; k < seq + 10; ++k) {
      std::vector<std::int64_t> a(4);
      for (int r = 0; r < 4; ++r)
        a[static_cast<std::size_t>(r)] =
            t + static_cast<std::int64_t>((u(rng) + (r == slow && k >= 50 ? 2.0 : 0)) * kMs);
      const std::int64_t end = *std::max_element(a.begin(), a.end()) + kMs / 10;
      for (int r = 0; r < 4; ++r) {
        const std::int64_t s = r < 2 ? 0 : skew;
        text[static_cast<std::size_t>(r)] += "c 0 " + std::to_string(k) + " all_reduce " +
                                             std::to_string(a[static_cast<std::size_t>(r)] + s) +
                                             " " + std::to_string(end + s) + " 0\n";
      }
      t = end + 2 * kMs;
    }
    for (int r = 0; r < 4; ++r) send_to(nodes[static_cast<std::size_t>(r / 2)].watch->address(), text[static_cast<std::size_t>(r)]);
  }
  // Both launchers end together, each waiting for the other's last records.
  std::thread other([&] { nodes[1].exchange->finish(); });
  nodes[0].exchange->finish();
  other.join();
  std::vector<Report> out;
  for (auto& n : nodes) {
    out.push_back(n.watch->finish());
    std::filesystem::remove_all(n.dir);
  }
  return out;
}

TEST(StragglerShare, TwoNodesASkewedHealthyJobNamesNobodyOnEither) {
  for (const auto& r : two_nodes(5000 * 1000000LL, -1)) {
    EXPECT_EQ(r.summary.groups.at(0).judged, 300) << r.lines[0];
    EXPECT_TRUE(r.summary.episodes.empty()) << r.lines[0] << "\n" << (r.lines.size() > 1 ? r.lines[1] : "");
    EXPECT_EQ(r.lines[0].rfind("stragglers: none (300 collectives judged in 1 group)", 0), 0u) << r.lines[0];
  }
}

TEST(StragglerShare, TwoNodesASlowRankOfTheSkewedNodeIsNamedOnBoth) {
  for (const auto& r : two_nodes(5000 * 1000000LL, 3)) {
    ASSERT_EQ(r.summary.episodes.size(), 1u) << r.lines[0];
    EXPECT_EQ(r.summary.episodes[0].rank, 3);
    EXPECT_LE(r.summary.episodes[0].named_at, 50 + 20);
    EXPECT_NE(r.lines.at(1).find("straggler: rank 3 [node-b-1] arrived"), std::string::npos)
        << r.lines[1];
  }
}

}  // namespace share_test

}  // namespace gpudiag::stragglers
