// The CUDA scanner against the reference and CPU scans, for every dtype, on
// the GPU: random and special values (nan, +-inf, subnormals, +-max, values
// at the 1e2/1e3/1e4 thresholds, -0), misaligned and big-endian data, a batch
// of many small tensors, a multi-chunk file through the pread pipeline, both
// file readers (windows of the mapping, pread) on files at odd alignments,
// device memory over 2^31 elements, and the device the user chose. Each
// skips with "no usable GPU: <why>" where this build has no CUDA or no
// device is visible. The choice of device itself (scan_gpu.h) is tested
// everywhere.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "gpu/cuda.h"
#include "numerics/formats/mapped_file.h"
#include "numerics/scan/scan_gpu.h"
#include "numerics/scan/scan_reference.h"
#include "numerics/scan/scanner.h"
#include "util/error.h"

namespace gpudiag::numerics {
namespace {

TEST(CudaScanner, MatchesTheReferenceForEveryDType) {
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not);
  if (!cuda) GTEST_SKIP() << "no usable GPU: " << why_not;

  std::mt19937_64 rng(42);
  std::vector<std::vector<std::uint8_t>> store;
  std::vector<TensorView> views;
  for (DType t : kAllDTypes) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, (std::size_t{1} << 22) + 7}) {
      for (ByteOrder order : {ByteOrder::little, ByteOrder::big}) {
        std::vector<std::uint8_t> data(count * dtype_size(t));
        for (auto& b : data) b = static_cast<std::uint8_t>(rng());
        if (is_float(t) && count > 2) {
          // One tensor of each size without NaN, so min and max are compared too.
          const FloatFormat& f = float_format(t);
          const std::size_t es = dtype_size(t);
          for (std::size_t i = 0; order == ByteOrder::little && i < count; ++i) {
            std::uint64_t bits = 0;
            std::memcpy(&bits, &data[i * es], es);
            if ((bits & (f.sign_mask - 1)) > f.nan_above()) data[i * es + es - 1] &= 0xBF;
          }
        }
        store.push_back(std::move(data));
        views.push_back({t, order, store.back().data(), count});
      }
    }
  }
  const auto got = cuda->scan(views);
  const auto cpu = make_cpu_scanner(0)->scan(views);
  ASSERT_EQ(got.size(), views.size());
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto want = testing::reference_scan(views[i]);
    EXPECT_TRUE(same_stats(got[i], want))
        << dtype_name(views[i].dtype) << " tensor " << i << " (" << views[i].count << " elements)";
    EXPECT_TRUE(same_stats(cpu[i], want)) << i;
  }
}

TEST(CudaScanner, AutoMeasuresAndIsTheCpuWithoutAGpuOrData) {
  std::string why_not;
  const bool have_cuda = make_cuda_scanner(&why_not) != nullptr;
  if (!have_cuda) {
    EXPECT_FALSE(why_not.empty());
  }
  // Nothing to measure on: the CPU, GPU or not.
  EXPECT_EQ(make_scanner(ScanDevice::automatic, 1)->describe().rfind("cpu", 0), 0u);
  // With data: the CPU without a GPU; with one, whichever measured faster.
  std::vector<std::uint8_t> data(std::size_t{8} << 20, 0x3c);
  const TensorView v{DType::F16, ByteOrder::little, data.data(), data.size() / 2};
  auto s = make_scanner(ScanDevice::automatic, 0, -1, {&v, 1});
  if (!have_cuda) {
    EXPECT_EQ(s->describe().rfind("cpu", 0), 0u) << s->describe();
  }
  EXPECT_TRUE(same_stats(s->scan({&v, 1})[0], make_cpu_scanner(1)->scan({&v, 1})[0]));
}

TEST(CudaScanner, SplitsTensorsLargerThanAChunkAndStillMatches) {
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not);
  if (!cuda) GTEST_SKIP() << "no usable GPU: " << why_not;
  // Pieces of several tensors in a row cycle through both staging buffers;
  // the large floats hold no NaN, so min and max are merged across pieces.
  std::mt19937_64 rng(7);
  const struct {
    DType dtype;
    std::size_t count;
  } shapes[] = {{DType::F32, 1000}, {DType::BF16, (std::size_t{64} << 20) + 3}, {DType::I8, 5},
                {DType::F64, 0},    {DType::F64, (std::size_t{8} << 20) + 5},   {DType::F16, 17}};
  std::vector<std::vector<std::uint8_t>> store;
  std::vector<TensorView> views;
  for (const auto& s : shapes) {
    const std::size_t es = dtype_size(s.dtype);
    std::vector<std::uint8_t> data(s.count * es);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    for (std::size_t i = 0; is_float(s.dtype) && s.count > 1000 && i < s.count; ++i) {
      const FloatFormat& f = float_format(s.dtype);
      std::uint64_t bits = 0;
      std::memcpy(&bits, &data[i * es], es);
      if ((bits & (f.sign_mask - 1)) > f.nan_above()) data[i * es + es - 1] &= 0xBF;
    }
    store.push_back(std::move(data));
    views.push_back({s.dtype, ByteOrder::little, store.back().data(), s.count});
  }
  const auto got = cuda->scan(views);
  ASSERT_EQ(got.size(), views.size());
  for (std::size_t i = 0; i < views.size(); ++i)
    EXPECT_TRUE(same_stats(got[i], testing::reference_scan(views[i])))
        << dtype_name(views[i].dtype) << " tensor " << i << " (" << views[i].count << " elements)";
}

TEST(CudaScanner, RunsOnTheRequestedGpuAndRefusesOneNotVisible) {
  const CudaStatus cuda = probe_cuda();
  if (!cuda.usable)
    GTEST_SKIP() << "no usable GPU: "
                 << (cuda.error.empty() ? "this build has no CUDA" : cuda.error);
  const int last = cuda.device_count - 1;
  std::string why_not;
  auto s = make_cuda_scanner(&why_not, last);
  ASSERT_TRUE(s) << why_not;
  EXPECT_NE(s->describe().find("device " + std::to_string(last) + ")"), std::string::npos)
      << s->describe();
  try {
    make_cuda_scanner(&why_not, cuda.device_count);
    FAIL() << "--gpu " << cuda.device_count << " was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(cuda.device_count) + " CUDA device(s)"),
              std::string::npos)
        << e.what();
  }
}

/// Little-endian bytes of `bits` for an element of `t`.
void put(std::vector<std::uint8_t>& out, DType t, std::uint64_t bits) {
  for (std::size_t b = 0; b < dtype_size(t); ++b) out.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
}

/// Every special pattern of `t`, each a few times, then random elements.
std::vector<std::uint8_t> special_values(DType t, std::size_t random_tail, std::mt19937_64& rng) {
  std::vector<std::uint8_t> out;
  const std::uint64_t all = dtype_size(t) == 8 ? ~std::uint64_t{0}
                                               : (std::uint64_t{1} << (8 * dtype_size(t))) - 1;
  std::vector<std::uint64_t> v = {0, 1, all, all >> 1, (all >> 1) + 1, 2, 99, 100, 101, 999, 1000,
                                  9999, 10000, 10001};
  if (is_float(t)) {
    const FloatFormat& f = float_format(t);
    for (std::uint64_t sign : {std::uint64_t{0}, f.sign_mask})
      for (std::uint64_t b : {std::uint64_t{0}, std::uint64_t{1}, f.min_normal - 1, f.min_normal,
                              f.max_finite, f.max_finite - 1, f.inf, f.nan_above() + 1,
                              f.sign_mask - 1, float_threshold_bits(t, 1e2),
                              float_threshold_bits(t, 1e2) - 1, float_threshold_bits(t, 1e3),
                              float_threshold_bits(t, 1e4)})
        v.push_back((b & (f.sign_mask - 1)) | sign);
  }
  for (std::uint64_t x : v) put(out, t, x & all);
  for (std::size_t i = 0; i < random_tail; ++i) put(out, t, rng() & all);
  return out;
}

/// The CPU scanner's results, which its own tests hold to the reference.
std::vector<TensorStats> cpu_scan(std::span<const TensorView> views) {
  return make_cpu_scanner(0)->scan(views);
}

void expect_same(std::span<const TensorView> views, const std::vector<TensorStats>& got) {
  const auto want = cpu_scan(views);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < views.size(); ++i)
    EXPECT_TRUE(same_stats(got[i], want[i]))
        << dtype_name(views[i].dtype) << " tensor " << i << " (" << views[i].count
        << " elements, at offset " << reinterpret_cast<std::uintptr_t>(views[i].data) % 16 << ")";
}

TEST(CudaScanner, SpecialValuesOfEveryDTypeAtEveryAlignment) {
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not);
  if (!cuda) GTEST_SKIP() << "no usable GPU: " << why_not;
  std::mt19937_64 rng(3);
  std::vector<std::vector<std::uint8_t>> store;
  std::vector<TensorView> views;
  for (DType t : kAllDTypes)
    for (std::size_t shift : {0, 1, 2, 4, 8, 15})  // 1 and 15 misalign every element wider than a byte
      for (ByteOrder order : {ByteOrder::little, ByteOrder::big})
        for (std::size_t tail : {std::size_t{0}, std::size_t{50000}}) {
          const auto values = special_values(t, tail, rng);
          std::vector<std::uint8_t> buf(values.size() + 32);
          std::memcpy(buf.data() + shift, values.data(), values.size());
          store.push_back(std::move(buf));
          views.push_back({t, order, store.back().data() + shift, values.size() / dtype_size(t)});
        }
  expect_same(views, cuda->scan(views));
  // Each one alone too: a launch with one segment, not a batch.
  for (std::size_t i = 0; i < views.size(); i += 7) expect_same({&views[i], 1}, cuda->scan({&views[i], 1}));
}

TEST(CudaScanner, ABatchOfManySmallTensorsIsOneScan) {
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not);
  if (!cuda) GTEST_SKIP() << "no usable GPU: " << why_not;
  std::mt19937_64 rng(11);
  std::vector<std::uint8_t> arena(40000 * 24);
  for (auto& b : arena) b = static_cast<std::uint8_t>(rng());
  std::vector<TensorView> views;
  std::size_t at = 0;
  for (std::size_t i = 0; i < 40000; ++i) {  // more than one chunk's segment table
    const DType t = kAllDTypes[i % std::size(kAllDTypes)];
    const std::size_t n = i % 3;  // 0, 1 or 2 elements
    views.push_back({t, ByteOrder::little, arena.data() + at, n});
    at += 16;
  }
  expect_same(views, cuda->scan(views));
}

TEST(CudaScanner, AMultiChunkFileGoesThroughThePreadPipeline) {
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not);
  if (!cuda) GTEST_SKIP() << "no usable GPU: " << why_not;
  char path[] = "/tmp/gpudiag-cuda-scan-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::mt19937_64 rng(5);
  std::vector<std::uint8_t> block(std::size_t{1} << 20);
  const std::size_t mib = 300;  // five 64 MiB chunks and a bit
  for (std::size_t i = 0; i < mib; ++i) {
    for (auto& b : block) b = static_cast<std::uint8_t>(rng());
    ASSERT_EQ(::write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
  }
  ::close(fd);
  {
    MappedFile m(path);
    const std::uint8_t* p = m.bytes().data();
    // A small tensor, a large bf16 one at an odd 2-byte offset, a big-endian
    // f32 one, and the rest as u8: every chunk boundary cuts a tensor.
    const std::vector<TensorView> views = {
        {DType::F16, ByteOrder::little, p + 16, 100},
        {DType::BF16, ByteOrder::little, p + 226, (std::uint64_t{100} << 20) / 2},
        {DType::F32, ByteOrder::big, p + (std::uint64_t{101} << 20), (std::uint64_t{90} << 20) / 4},
        {DType::U8, ByteOrder::little, p + (std::uint64_t{200} << 20), std::uint64_t{100} << 20}};
    expect_same(views, cuda->scan(views));
  }
  ::unlink(path);
}

/// A file of `mib` MiB (and `extra` bytes) of random bytes; its path.
std::string random_file(std::size_t mib, std::size_t extra, std::uint64_t seed) {
  char path[] = "/tmp/gpudiag-cuda-scan-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return {};
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> block(std::size_t{1} << 20);
  for (std::size_t i = 0; i <= mib; ++i) {
    for (auto& b : block) b = static_cast<std::uint8_t>(rng());
    const std::size_t n = i < mib ? block.size() : extra;
    if (::write(fd, block.data(), n) != static_cast<ssize_t>(n)) return ::close(fd), std::string();
  }
  ::close(fd);
  return path;
}

TEST(CudaScanner, BothFileReadersMatchTheCpuAtOddAlignments) {
  std::string why_not;
  if (!make_cuda_scanner(&why_not)) GTEST_SKIP() << "no usable GPU: " << why_not;
  const std::string big = random_file(300, 333, 21), tiny = random_file(0, 100, 22),
                    small = random_file(1, 0, 23);
  ASSERT_FALSE(big.empty() || tiny.empty() || small.empty());
  {
    MappedFile b(big), t(tiny), s(small);
    const std::uint8_t* p = b.bytes().data();
    const std::uint64_t MiB = std::uint64_t{1} << 20;
    std::vector<TensorView> views;
    // Small tensors of every dtype at odd offsets, in file order and not.
    std::uint64_t at = 1;
    for (DType d : kAllDTypes)
      for (ByteOrder o : {ByteOrder::little, ByteOrder::big}) {
        views.push_back({d, o, p + at, 1000});
        at += 1000 * dtype_size(d) + 3;
      }
    std::reverse(views.begin(), views.end());
    // An f32 tensor across the 128 MiB window edge, 3 bytes before it; bf16
    // at an odd byte across 64 MiB chunks; an empty one; big-endian f64 at
    // 200 MiB + 7; the same bytes twice as u8 and i8; the file's last bytes.
    views.push_back({DType::F32, ByteOrder::little, p + 128 * MiB - 3, MiB});
    views.push_back({DType::BF16, ByteOrder::little, p + 1 * MiB + 1, 70 * MiB / 2});
    views.push_back({DType::F16, ByteOrder::little, p + 77, 0});
    views.push_back({DType::F64, ByteOrder::big, p + 200 * MiB + 7, 9 * MiB / 8});
    views.push_back({DType::U8, ByteOrder::little, p + 250 * MiB, 5 * MiB});
    views.push_back({DType::I8, ByteOrder::little, p + 250 * MiB + 9, 5 * MiB - 9});
    views.push_back({DType::F32, ByteOrder::little, p + 300 * MiB + 1, 83});
    // A file smaller than a page, one under the windows' 4 MiB (read with
    // pread), and host memory.
    views.push_back({DType::F16, ByteOrder::little, t.bytes().data() + 1, 49});
    views.push_back({DType::F32, ByteOrder::big, s.bytes().data() + 5, 1000});
    std::vector<std::uint8_t> host(4099, 0x7f);
    views.push_back({DType::F16, ByteOrder::little, host.data() + 3, 2048});
    for (FileReader r : {FileReader::windows, FileReader::pread}) {
      auto cuda = make_cuda_scanner(&why_not, -1, r);
      ASSERT_TRUE(cuda) << why_not;
      expect_same(views, cuda->scan(views));
      // Twice: the second scan reuses the ring and registers the windows again.
      expect_same(views, cuda->scan(views));
      const std::string how = cuda->reader();
      if (r == FileReader::pread) {
        EXPECT_EQ(how.rfind("pread", 0), 0u) << how;
      }
      std::printf("[ reader   ] %s\n", how.c_str());  // which path ran, for the log
    }
  }
  for (const auto& f : {big, tiny, small}) ::unlink(f.c_str());
}

TEST(CudaScanner, DeviceMemoryOverTwoToThe31Elements) {
  const CudaStatus status = probe_cuda();
  if (!status.usable) GTEST_SKIP() << "no usable GPU: " << (status.error.empty() ? "this build has no CUDA" : status.error);
  const std::uint64_t n = (std::uint64_t{1} << 31) + 4099;  // int8: 2 GiB and a ragged tail
  set_device(0);
  const GpuInfo g = gpu_info(0);
  if (g.free_bytes < n + (std::uint64_t{1} << 30))
    GTEST_SKIP() << "no usable GPU: device 0 has " << (g.free_bytes >> 20) << " MiB free, the test needs "
                 << ((n >> 20) + 1024) << " MiB";
  std::vector<std::uint8_t> host(n);
  std::mt19937_64 rng(9);
  for (std::uint64_t i = 0; i < n; i += 8) {
    const std::uint64_t r = rng();
    std::memcpy(&host[i], &r, std::min<std::uint64_t>(8, n - i));
  }
  host[n - 1] = 0x80;  // -128 at the very end
  DeviceBuffer dev(n);
  copy_to_device(dev.get(), host.data(), n);
  const TensorView v{DType::I8, ByteOrder::little, host.data(), n};
  const auto want = cpu_scan({&v, 1})[0];
  EXPECT_TRUE(same_stats(scan_device_buffer(dev.get(), n, DType::I8, nullptr, 0), want));
  // The same bytes as F8_E5M2 (with nan and inf) through the device path.
  const TensorView f{DType::F8_E5M2, ByteOrder::little, host.data(), n};
  EXPECT_TRUE(same_stats(scan_device_buffer(dev.get(), n, DType::F8_E5M2, nullptr, 0), cpu_scan({&f, 1})[0]));
}

Env env_of(std::map<std::string, std::string> vars) { return Env(vars); }

TEST(ScanGpuChoice, TheRequestedOrdinalWins) {
  const auto g = choose_scan_gpu(2, 4, env_of({{"LOCAL_RANK", "1"}}));
  EXPECT_EQ(g.ordinal, 2);
  EXPECT_EQ(g.why, "--gpu 2");
}

TEST(ScanGpuChoice, AnOrdinalNotVisibleNamesTheCountAndCudaVisibleDevices) {
  try {
    choose_scan_gpu(2, 2, env_of({{"CUDA_VISIBLE_DEVICES", "4,5"}}));
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.one_line(),
              "--gpu 2: only 2 CUDA device(s) visible (CUDA_VISIBLE_DEVICES=4,5); try: give "
              "--gpu 0 to 1 (ordinals count the visible devices only)");
  }
  try {
    choose_scan_gpu(0, 0, env_of({}));
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES unset"), std::string::npos);
  }
}

TEST(ScanGpuChoice, TheLocalRankModuloTheVisibleDevices) {
  EXPECT_EQ(choose_scan_gpu(-1, 4, env_of({{"LOCAL_RANK", "6"}})).ordinal, 2);
  EXPECT_EQ(choose_scan_gpu(-1, 4, env_of({{"LOCAL_RANK", "6"}})).why,
            "LOCAL_RANK=6 modulo 4 visible device(s)");
  EXPECT_EQ(choose_scan_gpu(-1, 1, env_of({{"LOCAL_RANK", "3"}})).ordinal, 0);
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"SLURM_LOCALID", "3"}})).ordinal, 3);
  EXPECT_EQ(choose_scan_gpu(-1, 2, env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}})).ordinal, 1);
  // LOCAL_RANK first; a value that is not a rank is skipped.
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"LOCAL_RANK", "1"}, {"SLURM_LOCALID", "5"}})).ordinal,
            1);
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"LOCAL_RANK", "x"}, {"SLURM_LOCALID", "5"}})).ordinal,
            5);
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"LOCAL_RANK", "-1"}})).ordinal, 0);
}

TEST(ScanGpuChoice, DeviceZeroWithoutALocalRank) {
  EXPECT_EQ(choose_scan_gpu(-1, 4, env_of({{"CUDA_VISIBLE_DEVICES", "2,3"}})).ordinal, 0);
}

}  // namespace
}  // namespace gpudiag::numerics
