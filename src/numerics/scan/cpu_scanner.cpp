// The CPU scanner: tensors are cut into ranges of kChunk elements, a pool of
// threads takes ranges off a shared counter (small tensors are one range
// each, so thousands of tiny activations spread over the threads too), and
// the per-range results are merged in range order. The same ranges carry the
// replica checksums (checksum.h): a range's sum is computed in the pass of its
// statistics, or alone when no statistics are wanted, and sums merge by
// addition, so the threads never change a checksum.
#include <algorithm>
#include <atomic>
#include <thread>

#include "numerics/scan/checksum.h"
#include "numerics/scan/scan_kernels.h"
#include "numerics/scan/scanner.h"

namespace gpudiag::numerics {

namespace {

constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;       // elements per range
constexpr std::uint64_t kInlineWork = std::uint64_t{1} << 16;  // below this, no threads

struct Range {
  std::size_t tensor;
  std::uint64_t begin, end;
};

unsigned default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

class CpuScanner final : public Scanner {
 public:
  explicit CpuScanner(unsigned threads) : threads_(threads ? threads : default_threads()) {}

  std::vector<TensorStats> scan(std::span<const TensorView> tensors) override {
    std::vector<TensorStats> out(tensors.size());
    scan_host(tensors, threads_, out.data(), nullptr);
    return out;
  }

  std::string describe() const override {
    return "cpu (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
  }

 private:
  unsigned threads_;
};

}  // namespace

void scan_host(std::span<const TensorView> tensors, unsigned threads, TensorStats* stats,
               std::uint64_t* checksums) {
  if (!threads) threads = default_threads();
  std::vector<Range> ranges;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    total += tensors[i].count;
    for (std::uint64_t b = 0; b < tensors[i].count; b += kChunk)
      ranges.push_back({i, b, std::min(tensors[i].count, b + kChunk)});
  }
  std::vector<TensorStats> partial(stats ? ranges.size() : 0);
  std::vector<std::uint64_t> sums(checksums ? ranges.size() : 0);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t r; (r = next.fetch_add(1)) < ranges.size();) {
      const TensorView& v = tensors[ranges[r].tensor];
      std::uint64_t* sum = checksums ? &sums[r] : nullptr;
      if (stats) {
        partial[r] = scan_range(v, ranges[r].begin, ranges[r].end, sum);
      } else {
        const std::uint64_t size = dtype_size(v.dtype);
        *sum = checksum_sum(v.data, ranges[r].begin * size, ranges[r].end * size);
      }
    }
  };
  const std::size_t n_threads =
      total < kInlineWork ? 1 : std::min<std::size_t>(threads, ranges.size());
  if (n_threads <= 1) {
    work();
  } else {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < n_threads; ++t) pool.emplace_back(work);
    work();
  }  // the jthreads join here
  if (stats) {
    std::fill(stats, stats + tensors.size(), TensorStats{});
    for (std::size_t r = 0; r < ranges.size(); ++r)
      stats[ranges[r].tensor] = merge(stats[ranges[r].tensor], partial[r]);
  }
  if (checksums) {
    std::vector<std::uint64_t> total_sum(tensors.size(), 0);
    for (std::size_t r = 0; r < ranges.size(); ++r) total_sum[ranges[r].tensor] += sums[r];
    for (std::size_t i = 0; i < tensors.size(); ++i)
      checksums[i] = checksum_finish(total_sum[i], tensors[i].count * dtype_size(tensors[i].dtype));
  }
}

std::unique_ptr<Scanner> make_cpu_scanner(unsigned threads) {
  return std::make_unique<CpuScanner>(threads);
}

}  // namespace gpudiag::numerics
