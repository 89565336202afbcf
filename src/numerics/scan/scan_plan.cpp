// plan_chunks and choose_by_rates (scan_plan.h). The packing is greedy and
// in view order: a piece goes at the next 16-byte boundary of the current
// chunk; a tensor that does not fit starts a new chunk when it fits in one,
// else fills what is left (when that is worth it) and continues in the next
// chunks, cut at element boundaries.
#include "numerics/scan/scan_plan.h"

#include <algorithm>
#include <cstdio>

#include "util/strings.h"

namespace gpudiag::numerics {

namespace {

std::uint64_t align_up(std::uint64_t x) { return (x + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

/// Below this much space left, a large tensor starts in a fresh chunk instead.
constexpr std::uint64_t kMinSplitBytes = std::uint64_t{1} << 20;

class Planner {
 public:
  Planner(std::uint64_t capacity, std::size_t max_segments)
      : capacity_(capacity), max_segments_(max_segments) {}

  void add(std::uint32_t tensor, const TensorView& v, const ViewSource& src) {
    const std::uint64_t es = dtype_size(v.dtype);
    std::uint64_t first = 0;
    while (first < v.count) {
      if (chunks_.empty() || chunks_.back().pieces.size() >= max_segments_) open();
      const std::uint64_t at = align_up(chunks_.back().bytes);
      const std::uint64_t room = at < capacity_ ? (capacity_ - at) / es : 0;
      const std::uint64_t left = v.count - first;
      const bool fits_fresh = left * es <= capacity_;
      if (room < left && (fits_fresh || room * es < kMinSplitBytes) && !chunks_.back().pieces.empty()) {
        open();
        continue;
      }
      std::uint64_t n = std::min(left, room);
      // Cut a split piece at a 16-byte multiple, so the next piece (the
      // start of the next chunk) and this one both stay vector-aligned.
      if (n < left && n * es >= kStagingAlign) n -= n % (kStagingAlign / std::min(es, kStagingAlign));
      place(tensor, v, src, first, n, at);
      first += n;
    }
  }

  std::vector<Chunk> take() { return std::move(chunks_); }

 private:
  void open() { chunks_.emplace_back(); }

  void place(std::uint32_t tensor, const TensorView& v, const ViewSource& src, std::uint64_t first,
             std::uint64_t n, std::uint64_t at) {
    const std::uint64_t es = dtype_size(v.dtype);
    Chunk& c = chunks_.back();
    c.pieces.push_back({tensor, v.dtype, v.order == ByteOrder::big && es > 1, first, n, at});
    StagedRead r;
    r.file = src.file;
    r.offset = src.offset + first * es;
    r.host = v.data + first * es;
    r.staging_offset = at;
    r.bytes = n * es;
    if (!c.reads.empty()) {
      StagedRead& last = c.reads.back();
      const bool buffer_contiguous = last.staging_offset + last.bytes == at;
      const bool source_contiguous = r.file >= 0 ? last.file == r.file && last.offset + last.bytes == r.offset
                                                 : last.file < 0 && last.host + last.bytes == r.host;
      if (buffer_contiguous && source_contiguous) {
        last.bytes += r.bytes;
        c.bytes = at + r.bytes;
        return;
      }
    }
    c.reads.push_back(r);
    c.bytes = at + r.bytes;
  }

  std::uint64_t capacity_;
  std::size_t max_segments_;
  std::vector<Chunk> chunks_;
};

std::string gbps(double bytes_per_s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GB/s", bytes_per_s / 1e9);
  return b;
}

}  // namespace

std::vector<Chunk> plan_chunks(std::span<const TensorView> views,
                               std::span<const ViewSource> sources, std::uint64_t capacity,
                               std::size_t max_segments) {
  Planner p(capacity, std::max<std::size_t>(1, max_segments));
  for (std::size_t i = 0; i < views.size(); ++i)
    p.add(static_cast<std::uint32_t>(i), views[i], sources.empty() ? ViewSource{} : sources[i]);
  return p.take();
}

std::vector<Chunk> plan_chunks(std::span<const TensorView> views,
                               std::span<const ViewSource> sources,
                               std::span<const std::uint32_t> which, std::uint64_t capacity,
                               std::size_t max_segments) {
  Planner p(capacity, std::max<std::size_t>(1, max_segments));
  for (std::uint32_t i : which) p.add(i, views[i], sources.empty() ? ViewSource{} : sources[i]);
  return p.take();
}

std::vector<std::vector<StagedRead>> split_at_parts(std::span<const StagedRead> reads,
                                                    std::uint64_t chunk_bytes,
                                                    std::uint64_t part_bytes) {
  part_bytes = std::max<std::uint64_t>(part_bytes, 1);
  std::vector<std::vector<StagedRead>> out(
      std::max<std::uint64_t>(1, (chunk_bytes + part_bytes - 1) / part_bytes));
  for (StagedRead r : reads) {
    while (r.bytes > 0) {
      const std::uint64_t p = r.staging_offset / part_bytes;
      const std::uint64_t n = std::min(r.bytes, (p + 1) * part_bytes - r.staging_offset);
      StagedRead piece = r;
      piece.bytes = n;
      out[std::min<std::uint64_t>(p, out.size() - 1)].push_back(piece);
      r.offset += n;
      if (r.host) r.host += n;
      r.staging_offset += n;
      r.bytes -= n;
    }
  }
  return out;
}

std::vector<std::vector<StagedRead>> split_reads(std::span<const StagedRead> reads,
                                                 std::size_t parts) {
  parts = std::max<std::size_t>(parts, 1);
  std::uint64_t total = 0;
  for (const auto& r : reads) total += r.bytes;
  const std::uint64_t share = std::max<std::uint64_t>((total + parts - 1) / parts, 1);
  std::vector<std::vector<StagedRead>> out(parts);
  std::size_t part = 0;
  std::uint64_t room = share;  // bytes part `part` still takes
  for (StagedRead r : reads) {
    while (r.bytes > 0) {
      if (room == 0 && part + 1 < parts) ++part, room = share;
      const std::uint64_t n = part + 1 < parts ? std::min(r.bytes, room) : r.bytes;
      StagedRead piece = r;
      piece.bytes = n;
      out[part].push_back(piece);
      r.offset += n;
      if (r.host) r.host += n;
      r.staging_offset += n;
      r.bytes -= n;
      room -= std::min(room, n);
    }
  }
  return out;
}

AutoChoice choose_by_rates(double cpu, double gpu, std::uint64_t sample_bytes, double margin) {
  const std::string rates = "on the first " + human_bytes(sample_bytes) +
                            " the CPU scanner ran at " + gbps(cpu) + ", the GPU (read, copy, " +
                            "scan) at " + gbps(gpu);
  if (gpu > cpu * (1 + margin)) return {true, rates + ": using the GPU"};
  if (gpu > cpu)
    return {false, rates + ": using the CPU (the GPU is not more than " +
                       std::to_string(static_cast<int>(margin * 100)) + "% faster)"};
  return {false, rates + ": using the CPU"};
}

}  // namespace gpudiag::numerics
