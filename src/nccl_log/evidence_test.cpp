// Each finding quotes the log lines that state its fact: the network a rank chose for "ranks
// use different networks", the line that sets a variable for "NCCL_X differs", the WARN for an
// error. Each test builds a job whose logs also hold lines that merely mention the subject
// (transport lines, other settings) and checks that those are not the ones quoted.
#include <gtest/gtest.h>

#include <sstream>

#include "nccl_log/findings.h"

namespace gpudiag::nccl_log {
namespace evidence_test {  // named: the unity build puts this folder's tests in one unit

Job build(std::initializer_list<std::pair<const char*, const char*>> files) {
  JobBuilder b;
  for (const auto& [name, text] : files) {
    std::istringstream in(text);
    b.add_stream(in, name);
  }
  return b.finish();
}

std::vector<const Finding*> all(const std::vector<Finding>& fs, const std::string& id) {
  std::vector<const Finding*> out;
  for (const auto& f : fs)
    if (f.id == id) out.push_back(&f);
  return out;
}

const Finding& one(const std::vector<Finding>& fs, const std::string& id,
                   const std::string& title_has = {}) {
  for (const auto& f : fs)
    if (f.id == id && f.title.find(title_has) != std::string::npos) return f;
  ADD_FAILURE() << "no " << id << " finding with '" << title_has << "'";
  static const Finding none;
  return none;
}

/// The quoted texts, one string each.
std::vector<std::string> texts(const Finding& f) {
  std::vector<std::string> out;
  for (const auto& e : f.evidence) out.push_back(e.text);
  return out;
}

bool any_has(const Finding& f, const std::string& needle) {
  for (const auto& e : f.evidence)
    if (e.text.find(needle) != std::string::npos) return true;
  return false;
}

// Two ranks on IB, one on sockets; each log ends with transport lines.
constexpr const char* kIbRank0 =
    "a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.1.0.1<0>\n"
    "a:1:1 [0] NCCL INFO Using network IB\n"
    "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n"
    "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n";
constexpr const char* kIbRank1 =
    "a:2:2 [1] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB ; OOB ib0:10.1.0.1<0>\n"
    "a:2:2 [1] NCCL INFO Using network IB\n"
    "a:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 3 cudaDev 1 busId 2000 - Init COMPLETE\n"
    "a:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC/read\n";
constexpr const char* kSocketRank2 =
    "b:3:3 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>\n"
    "b:3:3 [0] NCCL INFO Using network Socket\n"
    "b:3:3 [0] NCCL INFO comm 0x3 rank 2 nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n"
    "b:3:3 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [send] via NET/Socket/0\n";

TEST(NcclLogEvidence, DifferentNetworksQuoteTheUsingNetworkLinesOfBothSides) {
  auto fs =
      find_problems(build({{"r0.log", kIbRank0}, {"r1.log", kIbRank1}, {"r2.log", kSocketRank2}}));
  const Finding& f = one(fs, "ranks-disagree", "different networks");
  EXPECT_EQ(f.who, (std::vector<std::string>{"rank 2 (b:3)"}));
  ASSERT_EQ(f.evidence.size(), 2u) << testing::PrintToString(texts(f));
  EXPECT_EQ(f.evidence[0].file, "r2.log");
  EXPECT_NE(f.evidence[0].text.find("Using network Socket"), std::string::npos);
  EXPECT_NE(f.evidence[1].text.find("Using network IB"), std::string::npos);
  EXPECT_FALSE(any_has(f, "Channel")) << testing::PrintToString(texts(f));
}

TEST(NcclLogEvidence, RoceAgainstInfinibandQuotesTheNicLines) {
  auto fs = find_problems(build({
      {"r0.log", kIbRank0},
      {"r1.log", kIbRank1},
      {"r2.log",
       "b:3:3 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.3<0>\n"
       "b:3:3 [0] NCCL INFO Using network IB\n"
       "b:3:3 [0] NCCL INFO comm 0x3 rank 2 nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n"
       "b:3:3 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [send] via NET/IB/0\n"},
  }));
  const Finding& f = one(fs, "ranks-disagree", "different networks");
  ASSERT_EQ(f.evidence.size(), 2u);
  EXPECT_NE(f.evidence[0].text.find("mlx5_0:1/RoCE"), std::string::npos);
  EXPECT_NE(f.evidence[1].text.find("/IB ; OOB"), std::string::npos);
}

TEST(NcclLogEvidence, ManyOddRanksStillLeaveRoomForTheMajoritysLine) {
  // Four socket ranks against five IB ranks: two socket lines and one IB line are quoted.
  JobBuilder b;
  for (int r = 0; r < 9; ++r) {
    const bool ib = r < 5;
    std::string host = ib ? "a" : "b", pid = std::to_string(100 + r);
    std::string pre = host + ":" + pid + ":" + pid + " [0] NCCL INFO ";
    std::istringstream in(pre + "Using network " + (ib ? "IB" : "Socket") + "\n" + pre + "comm 0x" +
                          pid + " rank " + std::to_string(r) +
                          " nranks 9 cudaDev 0 busId 1000 - Init COMPLETE\n");
    b.add_stream(in, "r" + std::to_string(r) + ".log");
  }
  auto fs = find_problems(b.finish());
  const Finding& f = one(fs, "ranks-disagree", "different networks");
  EXPECT_EQ(f.who.size(), 4u);
  ASSERT_EQ(f.evidence.size(), 3u);
  EXPECT_NE(f.evidence[0].text.find("Using network Socket"), std::string::npos);
  EXPECT_NE(f.evidence[1].text.find("Using network Socket"), std::string::npos);
  EXPECT_NE(f.evidence[2].text.find("Using network IB"), std::string::npos);
}

TEST(NcclLogEvidence, BootstrapAndPluginDisagreementsQuoteTheirOwnLines) {
  auto fs =
      find_problems(build({{"a.log",
                            "h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                            "h:1:1 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)\n"
                            "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                            "h:2:2 [1] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
                            "h:2:2 [1] NCCL INFO NET/Plugin: Loaded net plugin IBext_v8\n"
                            "h:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n"}}));
  const Finding& boot = one(fs, "ranks-disagree", "bootstrap over different interfaces");
  EXPECT_EQ(boot.evidence.size(), 2u);
  for (const auto& e : boot.evidence)
    EXPECT_NE(e.text.find("Bootstrap : Using"), std::string::npos);
  const Finding& plugin = one(fs, "ranks-disagree", "different NCCL net plugins");
  EXPECT_EQ(plugin.evidence.size(), 2u);
  for (const auto& e : plugin.evidence) EXPECT_NE(e.text.find("NET/Plugin"), std::string::npos);
}

TEST(NcclLogEvidence, AVariableThatDiffersQuotesTheLineSettingEachValue) {
  // Rank 2 sets NCCL_IB_HCA differently; the first ranks set another variable before it.
  auto fs = find_problems(build({{"a.log",
                                  "a:1:1 [0] NCCL INFO NCCL_DEBUG_FILE set by environment to x\n"
                                  "a:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n"
                                  "a:1:1 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.1<0>\n"
                                  "a:2:2 [1] NCCL INFO NCCL_DEBUG_FILE set by environment to x\n"
                                  "a:2:2 [1] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n"
                                  "a:2:2 [1] NCCL INFO Bootstrap : Using ib0:10.1.0.1<0>\n"
                                  "b:3:3 [0] NCCL INFO NCCL_DEBUG_FILE set by environment to x\n"
                                  "b:3:3 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_4\n"
                                  "b:3:3 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.3<0>\n"}}));
  const Finding& f = one(fs, "ranks-disagree", "NCCL_IB_HCA differs");
  EXPECT_EQ(f.who, (std::vector<std::string>{"b:3"}));
  ASSERT_EQ(f.evidence.size(), 2u) << testing::PrintToString(texts(f));
  EXPECT_NE(f.evidence[0].text.find("NCCL_IB_HCA set by environment to mlx5_4"), std::string::npos);
  EXPECT_NE(f.evidence[1].text.find("NCCL_IB_HCA set by environment to mlx5_0"), std::string::npos);
  EXPECT_TRUE(all(fs, "ranks-disagree").size() == 1u) << "NCCL_DEBUG_FILE is the same everywhere";
}

TEST(NcclLogEvidence, AVariableSetOnSomeRanksOnlyQuotesTheSettingLine) {
  auto fs = find_problems(build({{"a.log",
                                  "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                                  "a:2:2 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                                  "b:3:3 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
                                  "b:3:3 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>\n"}}));
  const Finding& f = one(fs, "ranks-disagree", "NCCL_IB_DISABLE differs");
  EXPECT_EQ(f.who, (std::vector<std::string>{"b:3"}));
  EXPECT_EQ(
      texts(f),
      (std::vector<std::string>{"b:3:3 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1."}));
}

TEST(NcclLogEvidence, P2pDisabledByTheEnvironmentQuotesTheVariable) {
  auto fs = find_problems(build({{"a.log",
                                  "n:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                                  "n:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n"
                                  "n:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM\n"}}));
  const Finding& f = one(fs, "p2p-disabled", "NCCL_P2P_DISABLE=1");
  EXPECT_EQ(
      texts(f),
      (std::vector<std::string>{"n:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1"}));
}

TEST(NcclLogEvidence, VersionMismatchQuotesBothVersions) {
  auto fs = find_problems(build({{"a.log",
                                  "a:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n"
                                  "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] via NET/IB/0\n"
                                  "a:2:2 [1] NCCL INFO NCCL version 2.19.3+cuda12.3\n"
                                  "b:3:3 [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n"}}));
  const Finding& f = one(fs, "version-mismatch");
  ASSERT_EQ(f.evidence.size(), 2u);
  EXPECT_NE(f.evidence[0].text.find("2.18.5"), std::string::npos);
  EXPECT_NE(f.evidence[1].text.find("2.19.3"), std::string::npos);
}

TEST(NcclLogEvidence, InterfaceFindingsQuoteTheInterfaceLines) {
  auto fs =
      find_problems(build({{"a.log",
                            "h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
                            "h:1:1 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>\n"
                            "h:1:1 [0] NCCL INFO Using network Socket\n"
                            "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/Socket/0\n"
                            "g:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"}}));
  EXPECT_EQ(texts(one(fs, "loopback-interface")),
            (std::vector<std::string>{"h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>"}));
  EXPECT_EQ(texts(one(fs, "container-interface")),
            (std::vector<std::string>{
                "h:1:1 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>"}));
}

TEST(NcclLogEvidence, ErrorFindingsQuoteTheirWarnLines) {
  auto fs = find_problems(build({{"a.log",
                                  "h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                                  "h:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open "
                                  "libibverbs.so[.1]\n"
                                  "h:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: "
                                  "Connect to 10.0.0.2<45763> failed : Connection refused\n"
                                  "h:1:1 [0] NCCL INFO misc/socket.cc:564 -> 2\n"
                                  "h:1:1 [0] NCCL INFO Using network Socket\n"}}));
  EXPECT_TRUE(any_has(one(fs, "verbs-missing"), "Failed to open libibverbs"));
  EXPECT_EQ(one(fs, "verbs-missing").evidence.size(), 1u);
  const Finding& refused = one(fs, "connection-refused");
  EXPECT_EQ(refused.evidence.size(), 1u);
  EXPECT_TRUE(any_has(refused, "Connection refused"));
  const Finding& first = one(fs, "first-warn");
  EXPECT_EQ(first.evidence.size(), 1u);
  EXPECT_TRUE(any_has(first, "NCCL WARN socketStartConnect"));
  // init-incomplete quotes where the process's log ends, by design.
  EXPECT_TRUE(any_has(one(fs, "init-incomplete"), "Using network Socket"));
}

}  // namespace
}  // namespace gpudiag::nccl_log
