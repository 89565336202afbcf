// The windows reader's plan (window_plan.h) without a GPU: the plan is
// carried out on the host (windows "registered" in the scanner's order, each
// copy a memcpy from the mapping into a chunk-sized buffer) and every piece's
// bytes compared with its tensor's, so every byte of every tensor is proven
// covered once, through window and chunk boundaries, at any alignment, with
// the number of registered windows bounded and the scanner's waits free of
// cycles. Random layouts with small limits reach the corner cases; named
// tests pin the ones a reader would ask about.
#include "numerics/scan/window_plan.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "numerics/formats/mapped_file.h"

namespace gpudiag::numerics {
namespace {

struct Layout {
  std::vector<std::vector<std::uint8_t>> files;
  std::vector<MappedRange> mappings;
  std::vector<TensorView> views;
  std::vector<WindowSource> sources;

  void add_file(std::uint64_t size, std::mt19937_64& rng) {
    files.emplace_back(size);
    for (auto& b : files.back()) b = static_cast<std::uint8_t>(rng());
  }
  void finish() {
    for (auto& f : files) mappings.push_back({f.data(), f.size()});
  }
  void add_view(int file, std::uint64_t offset, DType t, std::uint64_t count) {
    views.push_back({t, ByteOrder::little, files[file].data() + offset, count});
    sources.push_back({file, offset});
  }
};

/// Runs `plan` as the scanner would and checks every promise of window_plan.h.
void check_plan(const Layout& in, const WindowPlan& plan, const WindowLimits& l) {
  const std::size_t L = l.live_windows;
  // Registration order: window i after windows up to i - L were retired, and
  // a window retires once chunk retire_after was copied. No cycle: the chunk
  // that first needs window i comes after the retire point of i - L.
  for (std::size_t i = L; i < plan.windows.size(); ++i)
    EXPECT_LT(plan.windows[i - L].retire_after, plan.windows[i].first_chunk) << "window " << i;
  for (std::size_t i = 0; i < plan.windows.size(); ++i) {
    const HostWindow& w = plan.windows[i];
    EXPECT_EQ(w.begin % l.page_bytes, 0u);
    EXPECT_LT(w.begin, w.end);
    EXPECT_LE(w.end, (in.mappings[w.mapping].size + l.page_bytes - 1) / l.page_bytes * l.page_bytes);
    EXPECT_LE(w.end - w.begin, l.window_bytes);
    EXPECT_EQ(w.begin / l.window_bytes, (w.end - 1) / l.window_bytes) << "one grid cell";
    EXPECT_LE(w.first_chunk, w.last_chunk);
    EXPECT_LE(w.last_chunk, w.retire_after);
    // Two windows sharing a page are never registered together.
    for (std::size_t j = 0; j < i; ++j) {
      const HostWindow& o = plan.windows[j];
      if (o.mapping == w.mapping && o.begin < w.end && w.begin < o.end) {
        EXPECT_LE(j + L, i) << "windows " << j << " and " << i << " overlap";
      }
    }
  }
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> covered(in.views.size());
  for (std::size_t k = 0; k < plan.chunks.size(); ++k) {
    const WindowChunk& c = plan.chunks[k];
    EXPECT_LE(c.bytes, l.chunk_bytes);
    EXPECT_LE(c.pieces.size(), l.max_segments);
    EXPECT_FALSE(c.pieces.empty());
    std::vector<std::uint8_t> device(c.bytes, 0xEE);
    for (const WindowCopy& cp : c.copies) {
      ASSERT_LT(cp.window, c.windows_through);
      const HostWindow& w = plan.windows[cp.window];
      EXPECT_LE(w.first_chunk, k);
      EXPECT_GE(w.last_chunk, k);
      EXPECT_GE(cp.offset, w.begin);
      EXPECT_LE(cp.offset + cp.bytes, w.end);
      EXPECT_EQ(cp.dst_offset % kStagingAlign, cp.offset % kStagingAlign);
      ASSERT_LE(cp.dst_offset + cp.bytes, c.bytes);
      std::memcpy(device.data() + cp.dst_offset, in.mappings[w.mapping].base + cp.offset, cp.bytes);
    }
    for (const StagedPiece& p : c.pieces) {
      const TensorView& v = in.views[p.tensor];
      const std::uint64_t es = dtype_size(v.dtype);
      EXPECT_EQ(p.staging_offset % kStagingAlign,
                (in.sources[p.tensor].offset + p.first * es) % kStagingAlign);
      ASSERT_LE(p.staging_offset + p.count * es, c.bytes);
      EXPECT_EQ(std::memcmp(device.data() + p.staging_offset, v.data + p.first * es, p.count * es), 0)
          << "tensor " << p.tensor << " elements " << p.first << "+" << p.count << " in chunk " << k;
      covered[p.tensor].push_back({p.first, p.count});
    }
  }
  std::vector<char> pread(in.views.size(), 0);
  for (std::uint32_t i : plan.pread_views) pread[i] = 1;
  for (std::size_t i = 0; i < in.views.size(); ++i) {
    auto& c = covered[i];
    std::sort(c.begin(), c.end());
    std::uint64_t next = 0;
    for (auto [first, count] : c) {
      EXPECT_EQ(first, next) << "tensor " << i << ": elements covered twice or missed";
      EXPECT_GT(count, 0u);
      next = first + count;
    }
    if (pread[i]) {
      EXPECT_TRUE(c.empty()) << i;
    } else {
      EXPECT_EQ(next, in.views[i].count) << "tensor " << i;
    }
    if (in.views[i].count == 0) {
      EXPECT_FALSE(pread[i]);
    }
  }
}

WindowLimits small_limits() {
  WindowLimits l;
  l.chunk_bytes = 4096, l.window_bytes = 8192, l.page_bytes = 512, l.live_windows = 3;
  l.max_gap = 64, l.min_mapping_bytes = 1, l.max_segments = 8;
  return l;
}

TEST(WindowPlan, RandomLayoutsAreCoveredOnceWithinBoundedWindows) {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    Layout in;
    const int nfiles = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < nfiles; ++f) in.add_file(1 + rng() % 40000, rng);
    in.finish();
    for (int t = 0, n = static_cast<int>(rng() % 30); t < n; ++t) {
      const DType d = kAllDTypes[rng() % std::size(kAllDTypes)];
      const int f = static_cast<int>(rng() % nfiles);
      const std::uint64_t size = in.files[f].size(), es = dtype_size(d);
      const std::uint64_t offset = rng() % size;  // any alignment, overlaps allowed
      const std::uint64_t max_count = (size - offset) / es;
      in.add_view(f, offset, d, rng() % 4 == 0 ? 0 : (max_count ? rng() % (max_count + 1) : 0));
    }
    WindowLimits l = small_limits();
    l.live_windows = 2 + rng() % 3;
    l.max_gap = rng() % 2 ? 0 : 300;
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_plan(in, plan_windows(in.views, in.sources, in.mappings, l), l);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(WindowPlan, AnOddTensorCrossingWindowAndChunkBoundariesIsCopiedWhole) {
  std::mt19937_64 rng(7);
  Layout in;
  in.add_file(40000, rng);
  in.finish();
  // f32 at offset 8191 - 2: its first element straddles the 8 KiB cell edge.
  in.add_view(0, 8189, DType::F32, 5000);
  const WindowLimits l = small_limits();
  const auto plan = plan_windows(in.views, in.sources, in.mappings, l);
  EXPECT_GT(plan.chunks.size(), 1u);
  ASSERT_GE(plan.windows.size(), 2u);
  EXPECT_EQ(plan.chunks[0].pieces[0].staging_offset, 8189u % 16);
  EXPECT_EQ(plan.chunks[0].copies.size(), 2u) << "split at the cell edge, one run on the device";
  check_plan(in, plan, l);
}

TEST(WindowPlan, NeighbouringTensorsAreOneCopyAndTheGapIsCopiedAlong) {
  std::mt19937_64 rng(3);
  Layout in;
  in.add_file(3000, rng);  // smaller than a 4 KiB page
  in.finish();
  in.add_view(0, 100, DType::BF16, 50);  // [100, 200)
  in.add_view(0, 0, DType::U8, 0);        // empty: no piece, not for pread either
  in.add_view(0, 233, DType::F64, 10);    // 33 bytes past: within max_gap
  in.add_view(0, 1000, DType::I16, 3);    // too far: a new run at 1000 % 16
  WindowLimits l = small_limits();
  l.page_bytes = 4096, l.window_bytes = 8192;
  const auto plan = plan_windows(in.views, in.sources, in.mappings, l);
  ASSERT_EQ(plan.chunks.size(), 1u);
  ASSERT_EQ(plan.windows.size(), 1u);
  EXPECT_EQ(plan.windows[0].begin, 0u);
  EXPECT_EQ(plan.windows[0].end, 4096u);  // the whole last page, as the mapping has it
  ASSERT_EQ(plan.chunks[0].copies.size(), 2u);
  EXPECT_EQ(plan.chunks[0].copies[0].bytes, 213u);  // 100..313
  EXPECT_EQ(plan.chunks[0].copies[1].dst_offset, 224u + 1000 % 16);  // after 4 + 213, aligned up
  EXPECT_TRUE(plan.pread_views.empty());
  check_plan(in, plan, l);
}

TEST(WindowPlan, SmallMappingsAndHostMemoryStayOnThePreadPath) {
  std::mt19937_64 rng(5);
  Layout in;
  in.add_file(10000, rng);
  in.add_file(100, rng);
  in.finish();
  in.add_view(0, 0, DType::F32, 2000);
  in.add_view(1, 4, DType::F32, 20);
  std::vector<std::uint8_t> host(64, 1);
  in.views.push_back({DType::U8, ByteOrder::little, host.data(), host.size()});
  in.sources.push_back({});
  WindowLimits l = small_limits();
  l.min_mapping_bytes = 1000;
  const auto plan = plan_windows(in.views, in.sources, in.mappings, l);
  EXPECT_EQ(plan.pread_views, (std::vector<std::uint32_t>{1, 2}));
  check_plan(in, plan, l);
}

TEST(WindowPlan, ManyFilesInOneChunkNeverNeedMoreWindowsThanAllowed) {
  std::mt19937_64 rng(9);
  Layout in;
  for (int f = 0; f < 40; ++f) in.add_file(600 + f, rng);
  in.finish();
  for (int f = 0; f < 40; ++f) in.add_view(f, f % 7, DType::U8, 500);
  WindowLimits l = small_limits();
  l.max_segments = 1000, l.live_windows = 4;
  const auto plan = plan_windows(in.views, in.sources, in.mappings, l);
  for (const auto& c : plan.chunks) EXPECT_LE(c.copies.size(), 4u);  // ids span < 4
  check_plan(in, plan, l);
}

TEST(WindowPlan, SourcesComeFromTheMappingsEachMappingApart) {
  char path[] = "/tmp/gpudiag-window-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::vector<std::uint8_t> bytes(10000, 3);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  {
    MappedFile a(path), b(path);
    const std::uint8_t host[4] = {};
    const TensorView views[] = {{DType::F32, ByteOrder::little, a.bytes().data() + 9, 100},
                                {DType::U8, ByteOrder::little, host, 4},
                                {DType::U8, ByteOrder::little, b.bytes().data() + 1, 10},
                                {DType::U8, ByteOrder::little, a.bytes().data() + 5000, 10}};
    const MappedSources s = find_mapped_sources(views);
    ASSERT_EQ(s.mappings.size(), 2u);
    EXPECT_EQ(s.mappings[0].base, a.bytes().data());
    EXPECT_EQ(s.mappings[0].size, 10000u);
    EXPECT_EQ(s.sources[0].mapping, 0);
    EXPECT_EQ(s.sources[0].offset, 9u);
    EXPECT_EQ(s.sources[1].mapping, -1);
    EXPECT_EQ(s.sources[2].mapping, 1);
    EXPECT_EQ(s.sources[3].offset, 5000u);
  }
  ::unlink(path);
}

}  // namespace
}  // namespace gpudiag::numerics
