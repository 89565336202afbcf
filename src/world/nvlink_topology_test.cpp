// The NVLink reader on synthetic NVML answers: a GPU of an 8-GPU nvl_board (18
// links to NVSwitches), one of a 4-GPU mesh nvl_board (6 links to each of 3
// peers, as an HGX H100 4-GPU nvl_board), a link down; and the pairs of a node.
#include "world/nvlink_topology.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gpudiag {
namespace {

/// link l of the GPU: up unless `down`; to a switch, or to peers[l / per].
struct Board {
  bool to_switch = false;
  std::vector<std::string> peers;
  int per = 6;
  int down = -1;
};
Board* nvl_board = nullptr;

NvlinkApi nvlink_fake() {
  NvlinkApi a;
  a.init = [] { return 0; };
  a.shutdown = [] { return 0; };
  a.handle_by_bus_id = [](const char*, void** d) {
    *d = nvl_board;
    return 0;
  };
  a.state = [](void*, unsigned l, int* up) {
    const int links = nvl_board->to_switch ? 18 : static_cast<int>(nvl_board->peers.size()) * nvl_board->per;
    if (static_cast<int>(l) >= links) return 3;  // NVML_ERROR_NOT_SUPPORTED: no such link
    *up = static_cast<int>(l) != nvl_board->down;
    return 0;
  };
  a.remote_type = [](void*, unsigned, int* t) {
    *t = nvl_board->to_switch ? kNvlinkRemoteSwitch : 0;
    return 0;
  };
  a.remote_pci = [](void*, unsigned l, void* p) {
    auto* pci = static_cast<NvmlPciInfo*>(p);
    std::strcpy(pci->bus_id, ("0000" + nvl_board->peers[l / nvl_board->per]).c_str());
    return 0;
  };
  return a;
}

TEST(NvlinkTopology, AGpuOnNvSwitchesCountsItsLinks) {
  Board b{true};
  nvl_board = &b;
  EXPECT_EQ(read_nvlink_peers(nvlink_fake(), "0000:1b:00.0"), "switch:18");
}

TEST(NvlinkTopology, AGpuOfAMeshBoardCountsLinksPerPeer) {
  Board b{false, {"0000:3B:00.0", "0000:5D:00.0", "0000:DB:00.0"}};
  nvl_board = &b;
  EXPECT_EQ(read_nvlink_peers(nvlink_fake(), "0000:1b:00.0"),
            "0000:3b:00.0=6,0000:5d:00.0=6,0000:db:00.0=6");
  b.down = 7;  // the second peer's second link
  EXPECT_EQ(read_nvlink_peers(nvlink_fake(), "0000:1b:00.0"),
            "0000:3b:00.0=6,0000:5d:00.0=5,0000:db:00.0=6");
}

TEST(NvlinkTopology, WithoutNvmlNothingIsKnown) {
  EXPECT_EQ(read_nvlink_peers(NvlinkApi{}, "0000:1b:00.0"), "");
}

TEST(NvlinkTopology, TheNodesPairsAreItsFewestLinks) {
  const auto mesh = nvlink_pairs({{"a", "b=6,c=6"}, {"b", "a=6,c=5"}, {"c", "a=6,b=5"}});
  EXPECT_TRUE(mesh.known);
  EXPECT_FALSE(mesh.switched);
  EXPECT_EQ(mesh.links_per_pair, 5);
  const auto sw = nvlink_pairs({{"a", "switch:18"}, {"b", "switch:18"}});
  EXPECT_TRUE(sw.known && sw.switched);
  const auto pcie = nvlink_pairs({{"a", "none"}, {"b", "none"}});
  EXPECT_TRUE(pcie.known);
  EXPECT_EQ(pcie.links_per_pair, 0);
  EXPECT_FALSE(nvlink_pairs({{"a", "switch:18"}, {"b", ""}}).known) << "one GPU unknown";
  EXPECT_FALSE(nvlink_pairs({{"a", "switch:18"}}).known) << "one GPU has no pairs";
}

}  // namespace
}  // namespace gpudiag
