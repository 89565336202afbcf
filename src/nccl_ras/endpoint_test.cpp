// Endpoints as `gpudiag ras` takes them and NCCL_RAS_ADDR / NCCL_RAS_ENABLE as NCCL reads
// them (src/ras/client_support.cc rasClientInitSocket, src/misc/param.cc ncclLoadParam).
#include "nccl_ras/endpoint.h"

#include <gtest/gtest.h>

namespace gpudiag::ras {
namespace {

Env env_with(const std::string& name, const std::string& value) {
  return Env(std::map<std::string, std::string>{{name, value}});
}

TEST(RasEndpoint, Forms) {
  EXPECT_EQ(parse_endpoint("node7"), (Endpoint{"node7", 28028}));
  EXPECT_EQ(parse_endpoint("node7:30000"), (Endpoint{"node7", 30000}));
  EXPECT_EQ(parse_endpoint("10.0.0.2:28028"), (Endpoint{"10.0.0.2", 28028}));
  EXPECT_EQ(parse_endpoint("[::1]:29000"), (Endpoint{"::1", 29000}));
  EXPECT_EQ(parse_endpoint("[fe80::1%eth0]"), (Endpoint{"fe80::1%eth0", 28028}));
  EXPECT_EQ(parse_endpoint("fd00::2"), (Endpoint{"fd00::2", 28028}));
  EXPECT_EQ(parse_endpoint("::1")->text(), "[::1]:28028");
  EXPECT_EQ(parse_endpoint("localhost")->text(), "localhost:28028");
}

TEST(RasEndpoint, RefusesWhatIsNoAddress) {
  std::string why;
  for (const char* bad : {"", ":28028", "node:0", "node:70000", "node:12x", "[::1", "[::1]x",
                          "no de", "node;rm", "a\x1b[31m"}) {
    EXPECT_FALSE(parse_endpoint(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
    EXPECT_EQ(why.find('\x1b'), std::string::npos) << "the reason quotes escaped text";
  }
}

TEST(RasSettings, DefaultsAsNcclHasThem) {
  auto s = ras_settings(Env());
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.endpoint.text(), "localhost:28028");
  EXPECT_TRUE(s.problem.empty());
}

TEST(RasSettings, OnlyOneEnables) {
  // bootstrap.cc: ncclParamRasEnable() == 1; param.cc: strtoll(value, nullptr, 0).
  for (const char* off : {"0", "2", "no", "-1", "0x0"})
    EXPECT_FALSE(ras_settings(env_with("NCCL_RAS_ENABLE", off)).enabled) << off;
  for (const char* on : {"1", "0x1", "1abc", ""})
    EXPECT_TRUE(ras_settings(env_with("NCCL_RAS_ENABLE", on)).enabled) << on;
  EXPECT_EQ(ras_settings(env_with("NCCL_RAS_ENABLE", "0")).disabled_by, "NCCL_RAS_ENABLE=0");
}

TEST(RasSettings, AddressFromTheEnvironment) {
  auto s = ras_settings(env_with("NCCL_RAS_ADDR", "127.0.0.1:31000"));
  EXPECT_EQ(s.endpoint, (Endpoint{"127.0.0.1", 31000}));
  EXPECT_EQ(s.from, "NCCL_RAS_ADDR=127.0.0.1:31000");
  auto bad = ras_settings(env_with("NCCL_RAS_ADDR", "nowhere:"));
  EXPECT_NE(bad.problem.find("NCCL_RAS_ADDR=nowhere:"), std::string::npos);
}

TEST(RasSettings, APortlessAddressIsWhereNcclListens) {
  // utils.cc parseStringList leaves the port -1; socket.cc stores htons(-1): 65535.
  auto s = ras_settings(env_with("NCCL_RAS_ADDR", "10.0.0.7"));
  EXPECT_TRUE(s.problem.empty()) << s.problem;
  EXPECT_EQ(s.endpoint, (Endpoint{"10.0.0.7", 65535}));
  EXPECT_EQ(s.from, "NCCL_RAS_ADDR=10.0.0.7 (no port: NCCL listens on 65535)");
  // "[ADDR]" gives atoi("") = 0: the kernel picks a port no client can know.
  auto v6 = ras_settings(env_with("NCCL_RAS_ADDR", "[::1]"));
  EXPECT_NE(v6.problem.find("gives no port"), std::string::npos) << v6.problem;
  // Unbracketed IPv6 is cut at its first ':' by NCCL.
  auto bare = ras_settings(env_with("NCCL_RAS_ADDR", "fd00::2"));
  EXPECT_NE(bare.problem.find("[ADDRESS]:PORT"), std::string::npos) << bare.problem;
  // A portless endpoint given to `gpudiag ras` itself keeps the documented default.
  EXPECT_EQ(parse_endpoint("10.0.0.7")->port, 28028);
}

}  // namespace
}  // namespace gpudiag::ras
