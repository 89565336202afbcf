// The tree of judges (tree.h, relay.h) with real StorePlanes: its parts
// against hostile text, a whole job's checkpoint through node leaders, group
// judges and the root, with a rank missing, a leader that never reports and a
// group judge that is lost, and what a rank and a store carry as the job grows.
#include <gtest/gtest.h>

#include "tree/gone_store_test.h"

#include <algorithm>
#include <functional>
#include <set>
#include <memory>

#include "plane/checkpoint_digest.h"
#include "store/lazy_store.h"
#include "store/memory_store.h"
#include "tree/relay.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag {
namespace {

TEST(TreePart, RoundTripsAndDropsWhatTheSenderDoesNotSpeakFor) {
  TreePart p;
  p.checkpoint = "exchange";
  p.records = {{8, "{\"rank\":8}"}, {9, "r9 with \"quotes\"\nand a newline"}, {40, "not mine"}};
  p.missing = {10, 11, 99};
  p.notes = {{10, "pid 1 on n1, last phase: device"}, {99, "elsewhere"}};
  p.aborted = "rank 9 failed";
  auto back = decode_part(encode_part(p), 8, 15);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->checkpoint, "exchange");
  EXPECT_EQ(back->records.size(), 2u);
  EXPECT_EQ(back->records[9], "r9 with \"quotes\"\nand a newline");
  EXPECT_EQ(back->missing, (std::vector<int>{10, 11}));
  EXPECT_EQ(back->notes.count(99), 0u);
  EXPECT_EQ(back->aborted, "rank 9 failed");
  EXPECT_FALSE(back->wants_rank0);
  p.wants_rank0 = true;
  EXPECT_TRUE(decode_part(encode_part(p), 8, 15)->wants_rank0);
}

TEST(TreePart, RejectsTextThatIsNotAPartOrRunsPastItsEnd) {
  EXPECT_FALSE(decode_part("", 0, 7));
  EXPECT_FALSE(decode_part("{\"records\":{}}", 0, 7));
  TreePart p;
  p.records = {{1, std::string(100, 'x')}};
  std::string text = encode_part(p);
  EXPECT_TRUE(decode_part(text, 0, 7));
  EXPECT_FALSE(decode_part(text.substr(0, text.size() - 1), 0, 7));  // cut short
  EXPECT_FALSE(decode_part("gpudiag-part/1 99999999999\n{}", 0, 7));
  EXPECT_FALSE(decode_part("gpudiag-part/1 2\n{}\n1 5000000000\nx", 0, 7));
  // Notes are capped whatever the sender says.
  TreePart many;
  for (int r = 0; r < 500; ++r) {
    many.missing.push_back(r);
    many.notes[r] = "n";
  }
  auto back = decode_part(encode_part(many), 0, 499);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->missing.size(), 500u);
  EXPECT_LE(back->notes.size(), kMaxPartNotes);
}

TEST(TreeLayout, NamesNodesAndGroupsByTheirRanks) {
  TreeLayout L{1000, 8, 4};
  EXPECT_EQ(L.nodes(), 125);
  EXPECT_TRUE(L.grouped());
  EXPECT_EQ(L.groups(), 32);
  EXPECT_EQ(L.node_label(124), "node 124 (ranks 992-999)");
  EXPECT_EQ(L.group_label(31), "group 31 (nodes 124, ranks 992-999)");
  EXPECT_FALSE((TreeLayout{1024, 8, 128}).grouped());
}

/// A whole job in one thread: ranks on MemoryStores, every level's relay,
/// driven step by step as the simulator does. Each relay gets its own
/// connection to the root's and the groups' stores from `connect` (-1: the
/// root's; g: group g's): views of MemoryStores, or real TCP clients.
struct Rig {
  TreeLayout L;
  MemoryStore root{"root"};
  std::vector<std::unique_ptr<MemoryStore>> nodes, groups;
  std::vector<std::unique_ptr<Store>> links;  ///< every relay's connections
  std::function<std::unique_ptr<Store>(int)> connect;
  std::vector<std::unique_ptr<Relay>> leaders, judges;
  std::unique_ptr<Relay> top;
  std::vector<std::unique_ptr<Plane>> planes;
  std::set<int> silent_leaders;  ///< nodes whose leader never reports
  int lost_group = -1;           ///< its judge is gone from the start
  /// Leaders read other groups' nodes' records at those groups' stores
  /// (RelayOptions::connect_judge), as a job's leaders do.
  bool reach_other_groups = false;
  GoneStore gone;

  Rig(int world, int per_node, int group_nodes) : L{world, per_node, group_nodes} {
    for (int g = 0; g < L.groups(); ++g)
      groups.push_back(std::make_unique<MemoryStore>("group" + std::to_string(g)));
    connect = [this](int which) -> std::unique_ptr<Store> {
      return std::make_unique<StoreView>(which < 0 ? root : *groups[which]);
    };
  }

  Store* link(int which) {
    links.push_back(connect(which));
    return links.back().get();
  }

  RelayOptions opts(RelayLevel level, int index) {
    RelayOptions o;
    o.level = level;
    o.index = index;
    o.layout = L;
    o.timeout = std::chrono::milliseconds(300);
    o.digest_grace = std::chrono::milliseconds(2000);
    return o;
  }

  void build() {
    for (int g = 0; g < L.groups(); ++g) {
      auto o = opts(RelayLevel::group, g);
      o.below = link(g);
      o.above = link(-1);
      judges.push_back(std::make_unique<Relay>(o));
    }
    for (int k = 0; k < L.nodes(); ++k) {
      nodes.push_back(std::make_unique<MemoryStore>("node" + std::to_string(k)));
      auto o = opts(RelayLevel::node, k);
      o.below = nodes.back().get();
      if (L.grouped()) {
        const int g = L.group_of_node(k);
        o.above = g == lost_group ? static_cast<Store*>(&gone) : link(g);
        links.push_back(std::make_unique<LazyStore>([this] { return connect(-1); }, "root"));
        o.beyond = {links.back().get()};
      } else {
        o.above = link(-1);
      }
      if (reach_other_groups)
        o.connect_judge = [this](int level, int j) { return connect(level == 1 ? j : -1); };
      leaders.push_back(std::make_unique<Relay>(o));
    }
    auto o = opts(RelayLevel::root, 0);
    o.below = link(-1);
    top = std::make_unique<Relay>(o);
    for (int r = 0; r < L.world; ++r) {
      const int k = L.node_of(r);
      StorePlaneIdentity id{r, L.world, r % L.per_node, "n" + std::to_string(k), 1000 + r};
      id.tree = true;
      std::tie(id.node_first, id.node_last) = L.ranks_of_node(k);
      id.judge_grace = std::chrono::milliseconds(3000);
      planes.push_back(make_store_plane(std::make_unique<StoreView>(*nodes[k]), id,
                                        Deadline::after_seconds(5)));
    }
  }

  /// One checkpoint; ranks in `absent` do not arrive. Returns each rank's view.
  std::vector<Gathered> checkpoint(int seq, const std::set<int>& absent,
                                   const std::vector<std::vector<int>>& needs = {}) {
    auto need = [&](int r) { return r < static_cast<int>(needs.size()) ? needs[r] : std::vector<int>{}; };
    auto arrives = [&](int r) { return !absent.count(r) && !silent_leaders.count(L.node_of(r)); };
    for (int r = 0; r < L.world; ++r)
      if (arrives(r))
        publish_record(*planes[r], "exchange", "rec" + std::to_string(r), need(r),
                       Deadline::after(std::chrono::milliseconds(300)));
    for (int k = 0; k < L.nodes(); ++k)
      if (!silent_leaders.count(k)) leaders[k]->collect(seq, Deadline::after_seconds(5));
    for (int g = 0; g < L.groups(); ++g)
      if (g != lost_group) judges[g]->collect(seq, Deadline::after_seconds(5));
    top->collect(seq, Deadline::after_seconds(5));
    for (int g = 0; g < L.groups(); ++g)
      if (g != lost_group) judges[g]->pass_down(seq);
    for (int k = 0; k < L.nodes(); ++k)
      if (!silent_leaders.count(k)) leaders[k]->pass_down(seq);
    std::vector<Gathered> out(L.world);
    for (int r = 0; r < L.world; ++r)
      if (arrives(r))
        out[r] = planes[r]->gather_all("exchange", "rec" + std::to_string(r),
                                       Deadline::after_seconds(1), {}, need(r), {});
    return out;
  }
};

TEST(Tree, EveryRankReadsTheRootsDigestThroughItsLeader) {
  Rig rig(16, 4, 128);  // 4 nodes straight under the root
  rig.build();
  // Rank 1 needs rank 13 (node 3), rank 9 rank 0.
  auto seen = rig.checkpoint(0, {6}, {{}, {13}, {}, {}, {}, {}, {}, {}, {}, {0}});
  for (int r = 0; r < 16; ++r) {
    if (r == 6) continue;
    EXPECT_TRUE(seen[r].judged) << r;
    EXPECT_EQ(seen[r].missing, std::vector<int>{6}) << r;
  }
  EXPECT_EQ(seen[9].records.at(0), "rec0");
  EXPECT_EQ(seen[5].records.at(0), "rec0");  // once one asks, the digest carries it to all
  EXPECT_EQ(seen[1].records.at(13), "rec13");
  EXPECT_FALSE(seen[2].records.at(13));  // not asked for: not read
  EXPECT_NE(seen[3].notes.at(6).find("pid 1006 on n1"), std::string::npos) << seen[3].notes.at(6);
}

TEST(Tree, ASilentLeaderIsNamedWithItsRanksAndALostGroupJudgesNodesReportToTheRoot) {
  Rig rig(32, 2, 4);  // 16 nodes in 4 groups
  rig.silent_leaders = {5};
  rig.lost_group = 2;  // nodes 8-11 report to the root instead
  rig.build();
  auto seen = rig.checkpoint(0, {});
  for (int r = 0; r < 32; ++r) {
    if (r == 10 || r == 11) continue;
    EXPECT_EQ(seen[r].missing, (std::vector<int>{10, 11})) << r;
    EXPECT_NE(seen[r].notes.at(10).find("node 5 (ranks 10-11): its leader did not report"),
              std::string::npos)
        << seen[r].notes.at(10);
  }
  // The next checkpoint does not wait again, and names them without a note.
  auto again = rig.checkpoint(1, {});
  EXPECT_EQ(again[0].missing, (std::vector<int>{10, 11}));
  EXPECT_EQ(again[17].missing, (std::vector<int>{10, 11}));
}

TEST(Tree, AFailureAnnouncedOnOneNodeReachesEveryOtherNodesStore) {
  Rig rig(16, 4, 2);  // 4 nodes in 2 groups
  rig.build();
  rig.checkpoint(0, {});
  rig.planes[13]->announce_failure("rank 13 [n3-1] failed in device: ECC");
  // Copied up and down while relays wait or idle (every 100 ms at most).
  for (int i = 0; i < 50 && !rig.planes[2]->peer_failure(); ++i) {
    rig.leaders[3]->forward_announcements();
    rig.judges[1]->forward_announcements();
    rig.judges[0]->forward_announcements();
    rig.leaders[0]->forward_announcements();
    rig.root.wait({"never"}, Deadline::after(std::chrono::milliseconds(30)));
  }
  auto f = rig.planes[2]->peer_failure();
  ASSERT_TRUE(f);
  EXPECT_NE(f->find("rank 13 [n3-1] failed in device: ECC"), std::string::npos);
  EXPECT_FALSE(rig.planes[13]->peer_failure());  // its own, not echoed back
}

TEST(Tree, ARanksBytesAndAPartsSizeDoNotGrowWithTheJob) {
  std::vector<double> rank_bytes, node_bytes;
  for (int world : {128, 512}) {
    Rig rig(world, 8, 8);  // 2 and 8 groups (past 8 groups: supergroups, tree_levels_test.cpp)
    rig.build();
    for (int seq = 0; seq < 3; ++seq) rig.checkpoint(seq, {});
    rank_bytes.push_back(static_cast<double>(rig.planes[9]->bytes_moved()));
    node_bytes.push_back(static_cast<double>(rig.leaders[1]->bytes_up()));
  }
  EXPECT_LT(rank_bytes[1], rank_bytes[0] * 1.05);
  EXPECT_LT(node_bytes[1], node_bytes[0] * 1.05);
}

TEST(Tree, EveryStoreServesABoundedNumberOfClientsAsTheJobGrows) {
  // Real TCP stores for the root and the groups, one checkpoint through real
  // relays: a group's store serves its nodes' leaders and its judge, the
  // root's the groups' judges and the root's own, whatever the job's size.
  for (int nodes : {16, 64}) {
    Rig rig(nodes * 2, 2, 8);
    TcpStoreServerOptions so;
    so.bind_host = "127.0.0.1";
    so.token = "t";
    so.world_size = 64;
    TcpStoreServer root(so);
    std::vector<std::unique_ptr<TcpStoreServer>> groups;
    for (int g = 0; g < rig.L.groups(); ++g) groups.push_back(std::make_unique<TcpStoreServer>(so));
    rig.connect = [&](int which) -> std::unique_ptr<Store> {
      const int port = which < 0 ? root.port() : groups[which]->port();
      return std::make_unique<TcpStoreClient>("127.0.0.1", port, "t", Deadline::after_seconds(5));
    };
    rig.build();
    auto seen = rig.checkpoint(0, {3});
    EXPECT_EQ(seen[nodes * 2 - 1].missing, std::vector<int>{3});
    // Leaders reach the root only when their group's judge is lost.
    EXPECT_EQ(root.stats().connections, static_cast<std::size_t>(rig.L.groups() + 1));
    for (auto& g : groups) EXPECT_EQ(g->stats().connections, 8u + 1u);
  }
}

/// A store that refuses every write as a full store does, and answers reads.
class RefusingStore : public MemoryStore {
 public:
  void set(const std::string&, const std::string&, Deadline) override {
    throw Error(ExitCode::broken, "the store at full:1 refused SET: the store is full");
  }
};

TEST(Tree, ARefusedWriteIsNotALostJudge) {
  TreeLayout L{32, 2, 4};  // grouped
  MemoryStore node("node"), root("root");
  RefusingStore group;
  RelayOptions o = relay_options(L, RelayLevel::node, 5, std::chrono::milliseconds(200),
                                 std::chrono::milliseconds(0));
  o.below = &node;
  o.above = &group;
  o.beyond = {&root};
  Relay leader(o);
  node.set("cp/0/10", "rec10", Deadline::after_seconds(1));
  node.set("cp/0/11", "rec11", Deadline::after_seconds(1));
  EXPECT_THROW(leader.collect(0, Deadline::after_seconds(2)), Error);
  EXPECT_FALSE(root.try_get("tree/lost/1", Deadline::after_seconds(1)));
  EXPECT_FALSE(root.try_get("tree/cp/0/node/5", Deadline::after_seconds(1)));
}

// The checkpoint's name and wait come from every rank of a node, not only its
// first: when that rank never comes, the leader (which under gpudiag launch
// does not know the command's --timeout) still waits what the ranks said.
TEST(Tree, ANodeWhoseFirstRankNeverComesStillLearnsTheCheckpointsWait) {
  Rig rig(8, 4, 128);
  rig.build();
  for (int r : {5, 6, 7})  // node 1 without rank 4
    publish_record(*rig.planes[r], "exchange", "rec" + std::to_string(r), {},
                   Deadline::after(std::chrono::milliseconds(300)));
  auto wait = rig.nodes[1]->try_get("cp/0/wait", Deadline::after_seconds(1));
  ASSERT_TRUE(wait);
  EXPECT_GT(std::stoll(*wait), 0);
  EXPECT_EQ(rig.nodes[1]->try_get("cp/0/name", Deadline::after_seconds(1)), "exchange");
}

TEST(Tree, ARankANodesPartLeavesOutIsNamedMissing) {
  TreeLayout L{8, 4, 128};  // 2 nodes under the root
  MemoryStore root("root");
  TreePart p0, p1;
  p0.records = {{0, "r0"}, {1, "r1"}, {2, "r2"}, {3, "r3"}};
  p1.records = {{4, "r4"}, {6, "r6"}, {7, "r7"}};  // rank 5: neither record nor missing
  root.set("tree/cp/0/node/0", encode_part(p0), Deadline::after_seconds(1));
  root.set("tree/cp/0/node/1", encode_part(p1), Deadline::after_seconds(1));
  RelayOptions o = relay_options(L, RelayLevel::root, 0, std::chrono::milliseconds(200),
                                 std::chrono::milliseconds(0));
  o.below = &root;
  Relay top(o);
  ASSERT_TRUE(top.collect(0, Deadline::after_seconds(2)));
  auto digest = root.try_get("tree/cp/0/digest", Deadline::after_seconds(1));
  ASSERT_TRUE(digest);
  Gathered g;
  g.records.resize(8);
  ASSERT_TRUE(decode_digest(*digest, 7, 8, g));
  EXPECT_EQ(g.missing, std::vector<int>{5});
  EXPECT_NE(g.notes.at(5).find("passed on neither its record nor its absence"), std::string::npos);
}

// Every NCCL rank asks for rank 0's record at the exchange (its unique id);
// the digest carries it, so a leader reads no node's part for it: before,
// every leader of a grouped tree read node 0's part (from group 0's store).
// Where no rank asks (every later checkpoint), the digest goes without it.
TEST(Tree, TheDigestCarriesRankZerosRecordWhereARankAsks) {
  for (bool ask : {false, true}) {
    Rig rig(32, 2, 4);  // 16 nodes in 4 groups
    rig.build();
    std::vector<std::vector<int>> needs(ask ? 32 : 0, std::vector<int>{0});
    auto seen = rig.checkpoint(0, {}, needs);
    for (int r = 2; r < 32; ++r) EXPECT_EQ(seen[r].records.at(0).has_value(), ask) << r;
    // Node 1 (group 0, beside node 0): its leader copied no record for it.
    EXPECT_FALSE(rig.nodes[1]->try_get("cp/0/0", Deadline::after_seconds(1)))
        << "a leader read a part for a record the digest carries";
    const auto digest = rig.nodes[5]->try_get("cp/0/digest", Deadline::after_seconds(1));
    ASSERT_TRUE(digest);
    EXPECT_EQ(digest->find("rec0") != std::string::npos, ask) << *digest;
  }
}

// A sweep's partners are in other groups: each leader reads its ranks'
// partners' records at those groups' stores, never at the root's (2,048
// leaders kept a connection each there, past its limit, and the simulated
// sweep of 16,384 ranks stopped at its first round of node pairs).
TEST(Tree, ALeaderReadsAnotherGroupsRecordsAtThatGroupsStoreNotTheRoots) {
  Rig rig(32, 2, 4);  // 16 nodes in 4 groups
  rig.reach_other_groups = true;
  rig.build();
  auto connect = rig.connect;
  int to_root = 0;  // connections opened to the root's store from here on
  rig.connect = [&](int which) {
    if (which < 0) ++to_root;
    return connect(which);
  };
  std::vector<std::vector<int>> needs(32);
  needs[2] = {20};  // node 1 (group 0) asks for a rank of node 10 (group 2)
  needs[29] = {5};  // node 14 (group 3) for one of node 2 (group 0)
  auto seen = rig.checkpoint(0, {}, needs);
  EXPECT_EQ(seen[2].records.at(20), "rec20");
  EXPECT_EQ(seen[29].records.at(5), "rec5");
  EXPECT_EQ(to_root, 0);
}

TEST(Tree, ARootDigestCarriesOnlyRankZerosRecord) {
  TreeLayout L{32, 2, 4};  // 16 nodes in 4 groups
  MemoryStore root("root");
  for (int g = 0; g < 4; ++g) {
    TreePart p;
    auto [a, b] = L.ranks_of_group(g);
    for (int r = a; r <= b; ++r) p.records[r] = "forged" + std::to_string(r);  // more than rank 0's
    p.review = "";
    p.wants_rank0 = g == 2;  // a rank of group 2 asked for it
    root.set("tree/cp/0/group/" + std::to_string(g), encode_part(p), Deadline::after_seconds(1));
  }
  RelayOptions o = relay_options(L, RelayLevel::root, 0, std::chrono::milliseconds(200),
                                 std::chrono::milliseconds(0));
  o.below = &root;
  Relay top(o);
  ASSERT_TRUE(top.collect(0, Deadline::after_seconds(2)));
  Gathered g;
  g.records.resize(32);
  ASSERT_TRUE(decode_digest(*root.try_get("tree/cp/0/digest", Deadline::after_seconds(1)), 9, 32, g));
  EXPECT_EQ(g.records.at(0), "forged0");
  EXPECT_FALSE(g.records.at(17));
  EXPECT_EQ(g.records.stored(), 1u);
}

}  // namespace
}  // namespace gpudiag
