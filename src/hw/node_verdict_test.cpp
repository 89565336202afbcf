// A node's hardware verdict shared by its ranks over a real TcpStoreServer on
// 127.0.0.1: three ranks of one node read it once and each gets the same
// verdict; the end read comes from the rank that read the start; a reader
// that never leaves its text, or a text forged into the store, sends a rank
// to its own read; hostile texts never decode.
#include "hw/node_verdict.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace gpudiag::hw {
namespace {

struct Node {
  TcpStoreServer server{[] {
    TcpStoreServerOptions o;
    o.bind_host = "127.0.0.1";
    o.token = "job";
    return o;
  }()};
  std::unique_ptr<Store> client() {
    return std::make_unique<TcpStoreClient>("127.0.0.1", server.port(), "job", Deadline::after_seconds(5));
  }
  std::unique_ptr<Plane> plane(int rank, int size) {
    return make_store_plane(client(), {rank, size, rank, "node7", 100 + rank}, Deadline::after_seconds(5));
  }
};

NodeVerdict broken() {
  NodeVerdict v;
  v.unfit = "Xid 79 (GPU fallen off the bus) on 0000:3b:00 at 12:03:44: reboot the node";
  v.counts = {{"node/reboot", 1}, {"workload/none", 2}};
  v.unreadable = {"cannot read the kernel log (/dev/kmsg): permission denied"};
  return v;
}

void expect_same(const NodeVerdict& a, const NodeVerdict& b) {
  EXPECT_EQ(a.unfit, b.unfit);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_EQ(a.unreadable, b.unreadable);
}

TEST(NodeVerdict, RoundTripsAndRefusesHostileTexts) {
  const auto back = decode_node_verdict(encode_node_verdict(broken()));
  ASSERT_TRUE(back);
  expect_same(*back, broken());
  const auto fit = decode_node_verdict(encode_node_verdict({}));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->unfit, "");
  for (const std::string& bad : std::vector<std::string>{"", "not json", "[]", R"({"unfit":"x","counts":{}})", R"({"unfit":1,"counts":{},"unreadable":[]})",
        R"({"unfit":"a\nb","counts":{},"unreadable":[]})", R"({"unfit":"\u001b[2J","counts":{},"unreadable":[]})",
        R"({"unfit":"","counts":{"node/reboot":-1},"unreadable":[]})",
        R"({"unfit":"","counts":{"node/reboot":1.5},"unreadable":[]})",
        R"({"unfit":"","counts":{},"unreadable":[7]})",
        R"({"unfit":")" + std::string(2000, 'x') + R"(","counts":{},"unreadable":[]})",
        std::string(kMaxNodeReadText + 1, ' ')})
    EXPECT_FALSE(decode_node_verdict(bad)) << bad.substr(0, 80);
  std::string many = R"({"unfit":"","unreadable":[],"counts":{)";
  for (int i = 0; i < 40; ++i) many += (i ? "," : "") + ("\"k" + std::to_string(i) + "\":1");
  EXPECT_FALSE(decode_node_verdict(many + "}}"));
}

TEST(NodeVerdict, KeysFollowTheHostAndTheSources) {
  HwSources s, tree;
  tree.root = "/tmp/tree";
  EXPECT_EQ(node_read_key("check-start", "node7", s), node_read_key("check-start", "node7", s));
  EXPECT_NE(node_read_key("check-start", "node7", s), node_read_key("check-start", "node8", s));
  EXPECT_NE(node_read_key("check-start", "node7", s), node_read_key("check-start", "node7", tree));
  EXPECT_NE(node_read_key("check-start", "node7", s), node_read_key("check-end", "node7", s));
}

TEST(NodeVerdict, ThreeRanksOfANodeReadItOnceAndShareTheVerdict) {
  Node node;
  std::vector<std::unique_ptr<Plane>> planes;
  for (int r = 0; r < 3; ++r) planes.push_back(node.plane(r, 3));
  for (const auto& healthy : {false, true}) {  // a fit node's verdict is shared the same way
    std::atomic<int> reads{0};
    const std::string key = healthy ? "hw/fit/1" : "hw/broken/1";
    std::vector<std::future<NodeVerdictRead>> got;
    for (auto& p : planes)
      got.push_back(std::async(std::launch::async, [&, plane = p.get()] {
        return read_node_verdict(*plane, key, NodeReader::first, [&] {
          ++reads;
          return healthy ? NodeVerdict{} : broken();
        }, Deadline::after_seconds(20));
      }));
    int here = 0;
    for (auto& f : got) {
      const auto v = f.get();
      here += v.here;
      expect_same(v.verdict, healthy ? NodeVerdict{} : broken());
    }
    EXPECT_EQ(reads, 1);
    EXPECT_EQ(here, 1);
  }
}

TEST(NodeVerdict, TheEndReadComesFromTheStartsReader) {
  Node node;
  auto p0 = node.plane(0, 2), p1 = node.plane(1, 2);
  std::atomic<int> reads{0};
  auto waiter = std::async(std::launch::async, [&] {
    return read_node_verdict(*p1, "hw/end/1", NodeReader::other, [&] {
      ++reads;
      return NodeVerdict{};
    }, Deadline::after_seconds(20));
  });
  const auto mine = read_node_verdict(*p0, "hw/end/1", NodeReader::me, [&] {
    ++reads;
    return broken();
  }, Deadline::after_seconds(20));
  const auto theirs = waiter.get();
  EXPECT_TRUE(mine.here);
  EXPECT_FALSE(theirs.here);
  expect_same(theirs.verdict, broken());
  EXPECT_EQ(reads, 1);
}

TEST(NodeVerdict, WithoutItsReadersTextARankReadsItself) {
  Node node;
  auto p1 = node.plane(1, 2);
  int reads = 0;
  auto read = [&] {
    ++reads;
    return broken();
  };
  // Nobody reads: the wait ends at its deadline.
  auto v = read_node_verdict(*p1, "hw/none/1", NodeReader::other, read, Deadline::after_seconds(0.5));
  EXPECT_TRUE(v.here);
  expect_same(v.verdict, broken());
  // A text forged into the store is no verdict.
  node.client()->set("node/hw/forged/1", "{\"unfit\":\"\\u001b[31m\"}", Deadline::after_seconds(5));
  v = read_node_verdict(*p1, "hw/forged/1", NodeReader::other, read, Deadline::after_seconds(20));
  EXPECT_TRUE(v.here);
  expect_same(v.verdict, broken());
  EXPECT_EQ(reads, 2);
}

}  // namespace
}  // namespace gpudiag::hw
