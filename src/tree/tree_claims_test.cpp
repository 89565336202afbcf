// A tree store's judges' places over a real TcpStoreServer: a node leader
// joins the root on one connection it keeps, asks where its group's store is
// on another, and reaches the root on a third when that group's judge is
// lost; its report ('tree/lost/<g>') must be taken then (key_owners.h).
#include <gtest/gtest.h>

#include "store/store_wire.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace gpudiag {
namespace {

TEST(TreeClaims, ANodeLeaderReachesTheRootAgainAfterClosingItsFirstConnection) {
  TreeLayout L;
  L.world = 12;
  L.per_node = 3;
  L.group_nodes = 2;
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = "job";
  o.secret = std::string(32, 't');
  o.world_size = L.world;
  o.owned_keys = true;
  o.tree_role = TreeStoreRole{TreeStoreRole::Kind::root, 0, L};
  TcpStoreServer server(o);
  const auto node3 = storewire::node_claim(3);
  auto leader = [&] {
    return std::make_unique<TcpStoreClient>("127.0.0.1", server.port(), "job",
                                            Deadline::after_seconds(5), o.secret, node3);
  };
  auto join = leader();  // kept, as the leader's job store is
  {
    auto group = std::make_unique<TcpStoreClient>("127.0.0.1", server.port(), "job",
                                                  Deadline::after_seconds(5), o.secret,
                                                  storewire::group_claim(1));
    group->set("tree/group/1", "127.0.0.1:1", Deadline::after_seconds(5));
    EXPECT_EQ(leader()->get("tree/group/1", Deadline::after_seconds(5)), "127.0.0.1:1");
  }
  auto again = leader();
  EXPECT_NO_THROW(again->set("tree/lost/1", "its judge is gone", Deadline::after_seconds(5)));
  EXPECT_EQ(again->get("tree/lost/1", Deadline::after_seconds(5)), "its judge is gone");
}

}  // namespace
}  // namespace gpudiag
