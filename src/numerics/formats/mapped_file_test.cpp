// MappedFile on files that are not files (a FIFO, a device: refused by name, never
// blocking) and on a file truncated after it was mapped: reading the lost pages, from the
// main thread or from several threads at once, ends the process with one line naming the
// file and exit status 2 instead of dying of SIGBUS.
#include "numerics/formats/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "util/error.h"

namespace gpudiag::numerics {
namespace {

namespace fs = std::filesystem;

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpudiag-mapped-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_file(const std::string& name, std::size_t size) {
    const auto path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << std::string(size, 'x');
    return path;
  }

  fs::path dir_;
};

std::string error_of(const std::string& path) {
  try {
    MappedFile m(path);
  } catch (const UsageError& e) {
    return e.one_line();
  }
  return "";
}

TEST_F(MappedFileTest, MapsARegularFile) {
  const auto path = write_file("a.safetensors", 10000);
  MappedFile m(path);
  ASSERT_EQ(m.bytes().size(), 10000u);
  EXPECT_EQ(m.bytes()[9999], 'x');
  MappedFile moved(std::move(m));
  EXPECT_EQ(moved.bytes()[0], 'x');
}

TEST_F(MappedFileTest, RefusesAFifoWithoutBlocking) {
  const auto path = (dir_ / "pipe.safetensors").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // No writer ever opens it: a plain open(O_RDONLY) would wait forever.
  EXPECT_EQ(error_of(path), path +
                                ": is a FIFO (named pipe), not a regular file; try: pass "
                                ".safetensors or .npy files or a directory");
}

TEST_F(MappedFileTest, RefusesDevicesAndDirectories) {
  EXPECT_EQ(error_of("/dev/zero").rfind("/dev/zero: is a character device, not a regular file", 0),
            0u);
  EXPECT_NE(error_of(dir_.string()).find("is a directory, not a regular file"), std::string::npos);
  EXPECT_NE(error_of((dir_ / "missing").string()).find("cannot open: No such file"),
            std::string::npos);
}

TEST_F(MappedFileTest, TruncatedUnderTheReaderIsOneLineAndExitTwo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto path = write_file("t.safetensors", 1 << 20);
  EXPECT_EXIT(
      {
        MappedFile m(path);
        ::truncate(path.c_str(), 0);
        volatile std::uint8_t sink = m.bytes()[m.bytes().size() - 1];
        (void)sink;
        std::_Exit(0);  // not reached
      },
      ::testing::ExitedWithCode(2),
      // The child re-runs the test binary (threadsafe style): another pid, another folder.
      "^gpudiag: /.*/t\\.safetensors: the file changed while being read \\(it was truncated");
}

TEST_F(MappedFileTest, TruncatedUnderSeveralThreads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto path = write_file("threads.safetensors", 8 << 20);
  const auto other = write_file("other.safetensors", 4096);
  EXPECT_EXIT(
      {
        MappedFile keep(other);  // a second live mapping: the right file is named
        MappedFile m(path);
        ::truncate(path.c_str(), 4096);
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
          threads.emplace_back([&, t] {
            const auto b = m.bytes();
            unsigned sum = 0;
            for (std::size_t i = t * 4096; i < b.size(); i += 4 * 4096) sum += b[i];
            volatile unsigned sink = sum;
            (void)sink;
          });
        for (auto& th : threads) th.join();
        std::_Exit(0);  // not reached
      },
      ::testing::ExitedWithCode(2),
      "^gpudiag: /.*/threads\\.safetensors: the file changed while being read");
}

}  // namespace
}  // namespace gpudiag::numerics
