#include "gpu/cuda.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpudiag {
namespace {

TEST(CudaProbe, NeverThrowsAndExplainsWhenUnusable) {
  auto s = probe_cuda();
  if (!s.usable) {
    EXPECT_FALSE(s.error.empty());
    EXPECT_EQ(s.device_count, 0);
  } else {
    EXPECT_GT(s.device_count, 0);
  }
}

TEST(CudaVersion, Formats) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(0), "none");
}

TEST(DevicePattern, WritesAndReadsBack) {
  auto s = probe_cuda();
  if (!s.usable) GTEST_SKIP() << "no usable GPU here: " << s.error;
  set_device(0);
  const std::size_t words = (8u << 20) / 4;
  DeviceBuffer buf(words * 4);
  EXPECT_EQ(fill_and_verify_pattern(buf.get(), words, 0x1234u), 0u);
  std::vector<std::uint32_t> host(words);
  copy_to_host(host.data(), buf.get(), words * 4);
  for (std::size_t i = 0; i < words; i += 4097) ASSERT_EQ(host[i], pattern_word(i, 0x1234u)) << i;
}

}  // namespace
}  // namespace gpudiag
