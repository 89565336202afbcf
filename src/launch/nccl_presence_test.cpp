#include "launch/nccl_presence.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

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
  // A process that maps no NCCL (sleep; not this test's own process, which
  // other tests may have made load a stand-in libnccl); a rank that ended (its
  // pid gone) adds nothing: a gloo job whose rank failed first is still a gloo job.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Its maps are sleep's once it has exec'ed: wait for that.
  for (int i = 0; i < 5000; ++i) {
    char exe[256] = {};
    const auto n = ::readlink(("/proc/" + std::to_string(child) + "/exe").c_str(), exe, 255);
    if (n > 0 && std::string(exe, static_cast<std::size_t>(n)).find("sleep") != std::string::npos)
      break;
    ::usleep(1000);
  }
  EXPECT_FALSE(any_rank_maps_nccl({child}));
  EXPECT_FALSE(any_rank_maps_nccl({child, 0x7ffffff0}));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace gpudiag::launch
