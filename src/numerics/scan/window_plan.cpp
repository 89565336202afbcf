// plan_windows and find_mapped_sources (window_plan.h). The packing is greedy
// in file order: a view continues the current run of its mapping when it
// starts at most max_gap past the run's end (the gap is copied too, so a
// safetensors file's tensors are one copy), else starts a run at the next
// 16-byte boundary plus its file offset modulo 16. Before a piece's new bytes
// are copied, the windows they need are worked out; when that would make the
// chunk's window ids span live_windows or more, the piece starts a new chunk.
//
// Why that span keeps the scanner going: window i is registered only after
// window i - L is unregistered (L = live_windows), which waits for every chunk
// using windows up to i - L to be copied. A window is reused only while it is
// among the last L - 1 made, so once window i exists no later chunk uses
// windows up to i - L; and the chunk that first uses i spans fewer than L ids,
// so it does not use them either. Hence they are all used by chunks before
// i's first, which the scanner copies before it needs window i. A fresh chunk
// always fits: a piece is at most chunk_bytes <= window_bytes, two cells.
#include "numerics/scan/window_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "numerics/formats/mapped_file.h"

namespace gpudiag::numerics {

namespace {

constexpr std::uint64_t kMinWindowSplitBytes = std::uint64_t{1} << 20;

std::uint64_t round_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

WindowLimits sane(WindowLimits l) {
  l.page_bytes = std::max<std::uint64_t>(l.page_bytes, 1);
  l.chunk_bytes = std::max<std::uint64_t>(round_up(l.chunk_bytes, kStagingAlign), 64);
  l.window_bytes = round_up(std::max(l.window_bytes, l.chunk_bytes), l.page_bytes);
  l.live_windows = std::max<std::size_t>(l.live_windows, 2);
  l.max_segments = std::max<std::size_t>(l.max_segments, 1);
  return l;
}

class WindowPlanner {
 public:
  explicit WindowPlanner(const WindowLimits& l) : l_(l) {}

  void add(std::uint32_t tensor, const TensorView& v, const WindowSource& src) {
    const std::uint64_t es = dtype_size(v.dtype);
    std::uint64_t first = 0;
    while (first < v.count) {
      if (plan_.chunks.empty() || chunk().pieces.size() >= l_.max_segments) open();
      const std::uint64_t s = src.offset + first * es;
      const bool extend = run_.mapping == src.mapping && s >= run_.src_begin &&
                          s <= run_.src_end + l_.max_gap;
      const std::uint64_t dst = extend ? run_.dst_begin + (s - run_.src_begin)
                                       : round_up(chunk().bytes, kStagingAlign) + s % kStagingAlign;
      const std::uint64_t room = dst < l_.chunk_bytes ? (l_.chunk_bytes - dst) / es : 0;
      const std::uint64_t left = v.count - first;
      const bool fits_fresh = s % kStagingAlign + left * es <= l_.chunk_bytes;
      const bool fresh = chunk().pieces.empty();
      if (room < left && (fits_fresh || room * es < kMinWindowSplitBytes) && !fresh) {
        open();
        continue;
      }
      const std::uint64_t n = std::min(left, room), end = s + n * es;
      const std::uint64_t a = extend ? run_.src_end : s;  // new bytes to copy: [a, end)
      if (a < end && !fresh && !windows_fit(src.mapping, a, end)) {
        open();
        continue;
      }
      if (!extend) run_ = {src.mapping, s, s, dst};
      if (a < end) {
        copy(src.mapping, a, end);
        run_.src_end = end;
      }
      chunk().bytes = std::max(chunk().bytes, run_.dst_begin + (run_.src_end - run_.src_begin));
      chunk().pieces.push_back({tensor, v.dtype, v.order == ByteOrder::big && es > 1, first, n, dst});
      first += n;
    }
  }

  WindowPlan take() {
    std::size_t retire = 0;
    for (HostWindow& w : plan_.windows) w.retire_after = retire = std::max(retire, w.last_chunk);
    return std::move(plan_);
  }

  WindowPlan& plan() { return plan_; }

 private:
  struct Run {
    int mapping = -1;
    std::uint64_t src_begin = 0, src_end = 0, dst_begin = 0;
  };

  WindowChunk& chunk() { return plan_.chunks.back(); }

  void open() {
    plan_.chunks.emplace_back();
    run_ = {};
    lo_ = std::numeric_limits<std::uint32_t>::max(), hi_ = 0;
  }

  /// The window cell `g` of mapping `m` would use if `made` windows existed:
  /// its latest instance while among the last L - 1 made, else a new one.
  std::optional<std::uint32_t> reusable(int m, std::uint64_t g, std::size_t made) const {
    const auto it = latest_.find({m, g});
    if (it != latest_.end() && it->second + l_.live_windows > made) return it->second;
    return std::nullopt;
  }

  /// Whether copying [a, b) of mapping m keeps this chunk's ids within L.
  bool windows_fit(int m, std::uint64_t a, std::uint64_t b) const {
    std::size_t made = plan_.windows.size();
    std::uint32_t lo = lo_, hi = hi_;
    for (std::uint64_t g = a / l_.window_bytes; g <= (b - 1) / l_.window_bytes; ++g) {
      const auto id = reusable(m, g, made);
      const auto w = id ? *id : static_cast<std::uint32_t>(made++);
      lo = std::min(lo, w), hi = std::max(hi, w);
    }
    return hi - lo < l_.live_windows;
  }

  /// Copies [a, b) of mapping m to where the current run puts it, one copy
  /// per window cell, each merged into the chunk's last copy when contiguous.
  void copy(int m, std::uint64_t a, std::uint64_t b) {
    const std::size_t k = plan_.chunks.size() - 1;
    const std::uint64_t W = l_.window_bytes;
    for (std::uint64_t g = a / W; g <= (b - 1) / W; ++g) {
      const std::uint64_t from = std::max(a, g * W), to = std::min(b, (g + 1) * W);
      auto id = reusable(m, g, plan_.windows.size());
      if (!id) {
        id = static_cast<std::uint32_t>(plan_.windows.size());
        plan_.windows.push_back({m, std::numeric_limits<std::uint64_t>::max(), 0, k, k, 0});
        latest_[{m, g}] = *id;
      }
      HostWindow& w = plan_.windows[*id];
      w.last_chunk = k;
      w.begin = std::min(w.begin, from / l_.page_bytes * l_.page_bytes);
      w.end = std::max(w.end, std::min(round_up(to, l_.page_bytes), (g + 1) * W));
      lo_ = std::min(lo_, *id), hi_ = std::max(hi_, *id);
      chunk().windows_through = std::max(chunk().windows_through, *id + 1);
      const std::uint64_t dst = run_.dst_begin + (from - run_.src_begin);
      auto& copies = chunk().copies;
      if (!copies.empty() && copies.back().window == *id &&
          copies.back().offset + copies.back().bytes == from &&
          copies.back().dst_offset + copies.back().bytes == dst) {
        copies.back().bytes += to - from;
      } else {
        copies.push_back({*id, from, dst, to - from});
      }
    }
  }

  WindowLimits l_;
  WindowPlan plan_;
  Run run_;
  std::uint32_t lo_ = 0, hi_ = 0;  ///< window ids the current chunk uses
  std::map<std::pair<int, std::uint64_t>, std::uint32_t> latest_;
};

}  // namespace

WindowPlan plan_windows(std::span<const TensorView> views, std::span<const WindowSource> sources,
                        std::span<const MappedRange> mappings, const WindowLimits& limits) {
  const WindowLimits l = sane(limits);
  auto in_mapping = [&](std::size_t i) {
    const WindowSource& s = sources[i];
    const std::uint64_t bytes = views[i].count * dtype_size(views[i].dtype);
    return s.mapping >= 0 && static_cast<std::size_t>(s.mapping) < mappings.size() &&
           s.offset <= mappings[s.mapping].size && bytes <= mappings[s.mapping].size - s.offset;
  };
  std::vector<std::uint64_t> total(mappings.size(), 0);
  for (std::size_t i = 0; i < views.size() && i < sources.size(); ++i)
    if (views[i].count > 0 && in_mapping(i))
      total[sources[i].mapping] += views[i].count * dtype_size(views[i].dtype);
  std::vector<std::uint32_t> chosen;
  WindowPlanner p(l);
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (views[i].count == 0) continue;
    if (i < sources.size() && in_mapping(i) && total[sources[i].mapping] >= l.min_mapping_bytes)
      chosen.push_back(static_cast<std::uint32_t>(i));
    else
      p.plan().pread_views.push_back(static_cast<std::uint32_t>(i));
  }
  std::stable_sort(chosen.begin(), chosen.end(), [&](std::uint32_t x, std::uint32_t y) {
    return std::pair(sources[x].mapping, sources[x].offset) <
           std::pair(sources[y].mapping, sources[y].offset);
  });
  for (std::uint32_t i : chosen) p.add(i, views[i], sources[i]);
  return p.take();
}

MappedSources find_mapped_sources(std::span<const TensorView> views) {
  MappedSources out;
  out.sources.resize(views.size());
  std::map<const std::uint8_t*, int> index;  // mapping base -> its index
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (views[i].count == 0) continue;
    const auto src = mapped_source_of(views[i].data);
    if (!src) continue;
    const std::uint8_t* base = views[i].data - src->offset;
    auto [it, inserted] = index.try_emplace(base, static_cast<int>(out.mappings.size()));
    if (inserted) out.mappings.push_back({base, src->size});
    out.sources[i] = {it->second, src->offset};
  }
  return out;
}

}  // namespace gpudiag::numerics
