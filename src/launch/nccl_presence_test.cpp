#include "launch/nccl_presence.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpudiag::launch {
namespace {

TEST(NcclPresence, MapsOfAGlooRankShowNoNccl) {
  const char* gloo =
      "55d0c000-55d0d000 r--p 00000000 08:01 131 /usr/bin/python3.11\n"
      "7f10a000-7f10b000 r-xp 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
      "7f20a000-7f20b000 r-xp 00000000 08:01 78 /usr/lib/x86_64-linux-gnu/libgloo.so.0\n"
      "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n";
  EXPECT_FALSE(maps_show_nccl(gloo));
  EXPECT_FALSE(maps_show_nccl(""));
}

TEST(NcclPresence, LibncclOrTorchsCudaLibraryIsNccl) {
  EXPECT_TRUE(maps_show_nccl(
      "7f10a000-7f10b000 r-xp 00000000 08:01 77 /opt/venv/lib/python3.11/site-packages/nvidia/"
      "nccl/lib/libnccl.so.2\n"));
  EXPECT_TRUE(maps_show_nccl("7f10a000-7f10b000 r-xp 00000000 08:01 77 /usr/lib/libnccl.so.2.28.9"));
  EXPECT_TRUE(maps_show_nccl(
      "7f10a000-7f10b000 r-xp 00000000 08:01 77 /x/site-packages/torch/lib/libtorch_cuda.so"));
  // A directory of that name is not the library.
  EXPECT_FALSE(maps_show_nccl("7f10a000-7f10b000 r-xp 00000000 08:01 77 /opt/libnccl/lib/libfoo.so"));
}

TEST(NcclPresence, ARankAlreadyGoneSaysNothing) {
  // This test's own process maps no NCCL; a rank that ended (its pid gone) adds
  // nothing: a gloo job whose rank failed first is still a gloo job.
  EXPECT_FALSE(any_rank_maps_nccl({getpid()}));
  EXPECT_FALSE(any_rank_maps_nccl({getpid(), 0x7ffffff0}));
}

}  // namespace
}  // namespace gpudiag::launch
