// Finding libnccl at run time: an explicit path that is wrong, an NCCL too
// old, a library that is not NCCL, one that loads (its path and version
// reported), and the optional entry points of later versions. The stand-ins
// are built from tests/stubs/fake_nccl.c.
#include <gtest/gtest.h>

#include "comm/nccl_api.h"

namespace gpudiag {
namespace {

const std::string kDir = GPUDIAG_FAKE_NCCL_DIR;

TEST(NcclLoader, ExplicitPathThatDoesNotLoadIsNamed) {
  auto lib = find_nccl("/nonexistent/libnccl.so.2", "");
  EXPECT_FALSE(lib.usable());
  EXPECT_NE(lib.error.find("--nccl-lib /nonexistent/libnccl.so.2 could not be loaded"),
            std::string::npos)
      << lib.error;
  EXPECT_EQ(lib.error.find('\n'), std::string::npos);
}

TEST(NcclLoader, EnvironmentPathIsUsedWhenNoOption) {
  auto lib = find_nccl("", "/nonexistent/env/libnccl.so.2");
  EXPECT_FALSE(lib.usable());
  EXPECT_EQ(lib.how, "GPUDIAG_NCCL_LIB");
  EXPECT_NE(lib.error.find("GPUDIAG_NCCL_LIB /nonexistent/env/libnccl.so.2"), std::string::npos)
      << lib.error;
}

TEST(NcclLoader, TooOldIsRefusedWithItsVersionAndPath) {
  auto lib = find_nccl(kDir + "/old/libnccl.so.2", "");
  EXPECT_FALSE(lib.usable());
  EXPECT_EQ(lib.version, 21300);
  EXPECT_NE(lib.error.find("NCCL 2.13.0 at " + kDir + "/old/libnccl.so.2"), std::string::npos)
      << lib.error;
  EXPECT_NE(lib.error.find("older than 2.14"), std::string::npos) << lib.error;
}

TEST(NcclLoader, NotAnNcclIsRefused) {
  auto lib = find_nccl(kDir + "/notnccl/libnccl.so.2", "");
  EXPECT_FALSE(lib.usable());
  EXPECT_NE(lib.error.find("not a usable NCCL"), std::string::npos) << lib.error;
}

TEST(NcclLoader, ExplicitPathWinsOverTheEnvironment) {
  auto lib = find_nccl(kDir + "/full/libnccl.so.2", kDir + "/old/libnccl.so.2");
  ASSERT_TRUE(lib.usable()) << lib.error;
  EXPECT_EQ(lib.how, "--nccl-lib");
  EXPECT_EQ(lib.version, 22809);
  EXPECT_EQ(lib.path, kDir + "/full/libnccl.so.2");
  EXPECT_EQ(nccl_version_string(lib.version), "2.28.9");
  // The table is bound to the stand-in's entry points.
  nccl_abi::UniqueId id{};
  EXPECT_EQ(lib.api->GetUniqueId(&id), nccl_abi::kSystemError);
}

// ncclCommInitRankScalable (NCCL 2.23) is optional: a library without it
// loads, with the entry point null (the check then starts from one root);
// one with it has it bound.
TEST(NcclLoader, ScalableInitIsBoundWhereTheLibraryHasIt) {
  auto without = find_nccl(kDir + "/full/libnccl.so.2", "");
  ASSERT_TRUE(without.usable()) << without.error;
  EXPECT_EQ(without.api->CommInitRankScalable, nullptr);
  auto with = find_nccl(kDir + "/scalable/libnccl.so.2", "");
  ASSERT_TRUE(with.usable()) << with.error;
  ASSERT_NE(with.api->CommInitRankScalable, nullptr);
  nccl_abi::CommHandle c = nullptr;
  nccl_abi::UniqueId ids[2]{};
  EXPECT_EQ(with.api->CommInitRankScalable(&c, 2, 0, 2, ids, nullptr), nccl_abi::kSystemError)
      << "bound to the stand-in's ncclCommInitRankScalable";
}

TEST(NcclVersion, Formats) {
  EXPECT_EQ(nccl_version_string(22809), "2.28.9");
  EXPECT_EQ(nccl_version_string(2708), "2.7.8");
  EXPECT_EQ(nccl_version_string(0), "none");
}

}  // namespace
}  // namespace gpudiag
