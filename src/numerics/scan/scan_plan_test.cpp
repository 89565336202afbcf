// The CUDA scanner's host-side logic without a GPU: chunk planning, the
// staging ring's order, --device auto's decision, the kernel's tile count,
// and staging reads through pread from a real mapped file.
#include "numerics/scan/scan_plan.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>

#include "numerics/scan/cuda_scan_kernel.h"
#include "numerics/formats/mapped_file.h"
#include "numerics/scan/staged_reads.h"
#include "util/error.h"

namespace gpudiag::numerics {
namespace {

TensorView view(DType t, std::uint64_t n, const std::uint8_t* data = nullptr) {
  return {t, ByteOrder::little, data, n};
}

/// Every element of every view lands in exactly one piece, in order.
void expect_covers(std::span<const TensorView> views, const std::vector<Chunk>& chunks,
                   std::uint64_t capacity) {
  std::vector<std::uint64_t> next(views.size(), 0);
  for (const Chunk& c : chunks) {
    EXPECT_LE(c.bytes, capacity);
    for (const StagedPiece& p : c.pieces) {
      EXPECT_EQ(p.staging_offset % kStagingAlign, 0u);
      EXPECT_EQ(p.first, next[p.tensor]) << "tensor " << p.tensor;
      EXPECT_GT(p.count, 0u);
      next[p.tensor] += p.count;
    }
    std::uint64_t read = 0;
    for (const StagedRead& r : c.reads) read += r.bytes;
    std::uint64_t pieces = 0;
    for (const StagedPiece& p : c.pieces) pieces += p.count * dtype_size(p.dtype);
    EXPECT_EQ(read, pieces);
  }
  for (std::size_t i = 0; i < views.size(); ++i) EXPECT_EQ(next[i], views[i].count) << i;
}

TEST(ScanPlan, SmallTensorsShareAChunkEachAt16ByteBoundaries) {
  const TensorView views[] = {view(DType::F16, 3), view(DType::F32, 5), view(DType::I8, 0),
                              view(DType::F64, 2)};
  const auto chunks = plan_chunks(views, {}, 1 << 20, 100);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].pieces.size(), 3u);  // the empty tensor has no piece
  EXPECT_EQ(chunks[0].pieces[0].staging_offset, 0u);
  EXPECT_EQ(chunks[0].pieces[1].staging_offset, 16u);  // 6 bytes, aligned up
  EXPECT_EQ(chunks[0].pieces[2].staging_offset, 48u);  // 16 + 20 -> 48
  EXPECT_EQ(chunks[0].pieces[2].tensor, 3u);
  expect_covers(views, chunks, 1 << 20);
}

TEST(ScanPlan, ALargeTensorIsCutAtVectorBoundariesAcrossChunks) {
  const std::uint64_t cap = 4 << 20;
  const TensorView views[] = {view(DType::BF16, 10), view(DType::F32, (5 << 20) + 3)};
  const auto chunks = plan_chunks(views, {}, cap, 100);
  ASSERT_EQ(chunks.size(), 6u);  // 20 MiB + 12 bytes of f32 after 32 bytes, 4 MiB a chunk
  expect_covers(views, chunks, cap);
  for (const Chunk& c : chunks)
    for (const StagedPiece& p : c.pieces)
      if (p.first + p.count < views[p.tensor].count) {
        EXPECT_EQ(p.count * 4 % 16, 0u);
      }
}

TEST(ScanPlan, ATensorThatFitsAFreshChunkIsNotSplit) {
  const std::uint64_t cap = 4 << 20;
  const TensorView views[] = {view(DType::U8, 3 << 20), view(DType::U8, 2 << 20)};
  const auto chunks = plan_chunks(views, {}, cap, 100);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].pieces.size(), 1u);
  EXPECT_EQ(chunks[1].pieces[0].count, 2u << 20);
}

TEST(ScanPlan, ManyTinyTensorsRespectTheSegmentLimit) {
  std::vector<TensorView> views(1000, view(DType::F16, 1));
  const auto chunks = plan_chunks(views, {}, 1 << 20, 64);
  EXPECT_EQ(chunks.size(), 16u);  // ceil(1000 / 64)
  for (const Chunk& c : chunks) EXPECT_LE(c.pieces.size(), 64u);
  expect_covers(views, chunks, 1 << 20);
}

TEST(ScanPlan, ContiguousFileRangesBecomeOneRead) {
  const TensorView views[] = {view(DType::F32, 4), view(DType::F32, 4), view(DType::F16, 3),
                              view(DType::F16, 8)};
  // File offsets: contiguous 16 + 16 bytes, then 6 bytes, then (after a gap in
  // the buffer, since 6 is not a multiple of 16) a second read.
  const ViewSource sources[] = {{0, 100}, {0, 116}, {0, 132}, {0, 138}};
  const auto chunks = plan_chunks(views, sources, 1 << 20, 100);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].reads.size(), 2u);
  EXPECT_EQ(chunks[0].reads[0].offset, 100u);
  EXPECT_EQ(chunks[0].reads[0].bytes, 38u);
  EXPECT_EQ(chunks[0].reads[1].offset, 138u);
  EXPECT_EQ(chunks[0].reads[1].staging_offset, 48u);
}

TEST(ScanPlan, BigEndianPiecesAreSwappedExceptBytes) {
  const TensorView views[] = {{DType::I32, ByteOrder::big, nullptr, 4},
                              {DType::U8, ByteOrder::big, nullptr, 4}};
  const auto chunks = plan_chunks(views, {}, 1 << 20, 100);
  EXPECT_TRUE(chunks[0].pieces[0].swap);
  EXPECT_FALSE(chunks[0].pieces[1].swap);
}

TEST(ScanRing, ChunksWaitForTheChunkThatUsedTheirBuffers) {
  const Ring ring{3, 2};
  EXPECT_FALSE(ring.fill_waits_for(2));
  EXPECT_EQ(ring.fill_waits_for(3), 0u);
  EXPECT_EQ(ring.fill_waits_for(7), 4u);
  EXPECT_FALSE(ring.copy_waits_for(1));
  EXPECT_EQ(ring.copy_waits_for(5), 3u);
  for (std::size_t k = 3; k < 20; ++k) {
    EXPECT_EQ(ring.host_slot(k), ring.host_slot(*ring.fill_waits_for(k)));
    EXPECT_EQ(ring.device_slot(k), ring.device_slot(*ring.copy_waits_for(k)));
  }
}

TEST(ScanPlanSplit, PartsCoverEveryByteOnceInStep) {
  // A long file read, a short host copy and a read of another file.
  static const std::uint8_t host[100] = {};
  const std::vector<StagedRead> reads = {{0, 4096, nullptr, 0, 1000},
                                         {-1, 0, host, 1008, 100},
                                         {1, 0, nullptr, 1120, 333}};
  for (std::size_t parts : {1, 2, 3, 4, 8, 5000}) {
    const auto split = split_reads(reads, parts);
    ASSERT_EQ(split.size(), parts);
    std::vector<int> seen(1120 + 333, 0);
    std::uint64_t most = 0;
    for (const auto& list : split) {
      std::uint64_t bytes = 0;
      for (const auto& r : list) {
        bytes += r.bytes;
        for (std::uint64_t b = 0; b < r.bytes; ++b) ++seen[r.staging_offset + b];
        // The source stays in step with the staging offset.
        if (r.file == 0) EXPECT_EQ(r.offset - 4096, r.staging_offset);
        if (r.file == 1) EXPECT_EQ(r.offset, r.staging_offset - 1120);
        if (r.file < 0) EXPECT_EQ(r.host - host, static_cast<std::ptrdiff_t>(r.staging_offset - 1008));
      }
      most = std::max(most, bytes);
    }
    for (std::size_t b = 0; b < seen.size(); ++b) {
      const bool inside = b < 1000 || (b >= 1008 && b < 1108) || b >= 1120;
      EXPECT_EQ(seen[b], inside ? 1 : 0) << "byte " << b << " with " << parts << " parts";
    }
    EXPECT_LE(most, (1433 + parts - 1) / parts + 0u) << parts;  // about equal shares
  }
}

TEST(ScanPlanParts, EachPartHoldsWhatLandsInItsRangeOfTheBuffer) {
  static const std::uint8_t host[100] = {};
  const std::vector<StagedRead> reads = {{0, 4097, nullptr, 0, 1000},
                                         {-1, 0, host, 1008, 100},
                                         {1, 3, nullptr, 1120, 333}};
  for (std::uint64_t part : {1, 7, 16, 64, 1000, 1453, 4096}) {
    const auto split = split_at_parts(reads, 1453, part);
    ASSERT_EQ(split.size(), (1453 + part - 1) / part) << part;
    std::vector<int> seen(1453, 0);
    for (std::size_t p = 0; p < split.size(); ++p) {
      for (const auto& r : split[p]) {
        EXPECT_GE(r.staging_offset, p * part);
        EXPECT_LE(r.staging_offset + r.bytes, (p + 1) * part);
        EXPECT_GT(r.bytes, 0u);
        for (std::uint64_t b = 0; b < r.bytes; ++b) ++seen[r.staging_offset + b];
        if (r.file == 0) EXPECT_EQ(r.offset - 4097, r.staging_offset);
        if (r.file == 1) EXPECT_EQ(r.offset - 3, r.staging_offset - 1120);
        if (r.file < 0) EXPECT_EQ(r.host - host, static_cast<std::ptrdiff_t>(r.staging_offset - 1008));
      }
    }
    for (std::size_t b = 0; b < seen.size(); ++b) {
      const bool inside = b < 1000 || (b >= 1008 && b < 1108) || b >= 1120;
      EXPECT_EQ(seen[b], inside ? 1 : 0) << "byte " << b << " with parts of " << part;
    }
  }
  EXPECT_EQ(split_at_parts({}, 0, 64).size(), 1u);
}

TEST(ScanPlan, ASubsetOfViewsKeepsTheirIndices) {
  const TensorView views[] = {view(DType::F16, 3), view(DType::F32, 5), view(DType::F64, 2)};
  const std::uint32_t which[] = {2, 0};
  const auto chunks = plan_chunks(views, {}, which, 1 << 20, 100);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].pieces.size(), 2u);
  EXPECT_EQ(chunks[0].pieces[0].tensor, 2u);
  EXPECT_EQ(chunks[0].pieces[0].count, 2u);
  EXPECT_EQ(chunks[0].pieces[1].tensor, 0u);
  EXPECT_EQ(chunks[0].pieces[1].staging_offset, 16u);
}

TEST(ScanAuto, TheFasterBackendWinsAndTheCpuOnATie) {
  const auto gpu = choose_by_rates(5e9, 20e9, 64 << 20);
  EXPECT_TRUE(gpu.gpu);
  EXPECT_NE(gpu.why.find("the CPU scanner ran at 5.00 GB/s"), std::string::npos) << gpu.why;
  EXPECT_NE(gpu.why.find("at 20.00 GB/s: using the GPU"), std::string::npos) << gpu.why;
  EXPECT_FALSE(choose_by_rates(20e9, 5e9, 64 << 20).gpu);
  const auto tie = choose_by_rates(10e9, 10.5e9, 64 << 20);
  EXPECT_FALSE(tie.gpu);
  EXPECT_NE(tie.why.find("not more than 10% faster"), std::string::npos) << tie.why;
}

TEST(ScanKernelTiles, CountFromTheAddressRoundedDownTo16Bytes) {
  using cuda_scan::kTileBytes;
  EXPECT_EQ(cuda_scan::tiles_of(0x1000, 0), 0u);
  EXPECT_EQ(cuda_scan::tiles_of(0x1000, 1), 1u);
  EXPECT_EQ(cuda_scan::tiles_of(0x1000, kTileBytes), 1u);
  EXPECT_EQ(cuda_scan::tiles_of(0x1002, kTileBytes), 2u);  // the head spills over
  EXPECT_EQ(cuda_scan::tiles_of(0x100E, kTileBytes - 14), 1u);
}

TEST(StagingFiles, ReadsMappedTensorsWithPreadAndOthersFromMemory) {
  char path[] = "/tmp/gpudiag-staging-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::vector<std::uint8_t> bytes(100000);
  std::iota(bytes.begin(), bytes.end(), std::uint8_t{7});
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  {
    MappedFile m(path);
    const std::uint8_t other[5] = {1, 2, 3, 4, 5};
    const TensorView views[] = {view(DType::U8, 1000, m.bytes().data() + 3),
                                view(DType::U8, 5, other),
                                view(DType::F32, 20000, m.bytes().data() + 1003)};
    const StagingFiles files(views);
    ASSERT_EQ(files.file_count(), 1u);
    EXPECT_EQ(files.sources()[0].file, 0);
    EXPECT_EQ(files.sources()[0].offset, 3u);
    EXPECT_EQ(files.sources()[1].file, -1);
    EXPECT_EQ(files.sources()[2].offset, 1003u);
    const auto chunks = plan_chunks(views, files.sources(), 1 << 20, 100);
    ASSERT_EQ(chunks.size(), 1u);
    std::vector<std::uint8_t> buf(chunks[0].bytes);
    files.fill(chunks[0].reads, buf.data());
    for (const StagedPiece& p : chunks[0].pieces) {
      const std::uint64_t n = p.count * dtype_size(p.dtype);
      EXPECT_EQ(std::memcmp(buf.data() + p.staging_offset, views[p.tensor].data, n), 0) << p.tensor;
    }
    // Truncated under the scan: the read says so, naming the file.
    ::truncate(path, 2000);
    try {
      files.fill(chunks[0].reads, buf.data());
      FAIL() << "a truncated file was read";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("the file changed while being read"), std::string::npos);
    }
  }
  ::unlink(path);
}

}  // namespace
}  // namespace gpudiag::numerics
