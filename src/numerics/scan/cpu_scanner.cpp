// The CPU scanner: tensors are cut into ranges of kChunk elements, a pool of
// threads takes ranges off a shared counter (small tensors are one range
// each, so thousands of tiny activations spread over the threads too), and
// the per-range statistics are merged in range order.
#include <algorithm>
#include <atomic>
#include <thread>

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

class CpuScanner final : public Scanner {
 public:
  explicit CpuScanner(unsigned threads) : threads_(threads ? threads : default_threads()) {}

  std::vector<TensorStats> scan(std::span<const TensorView> tensors) override {
    std::vector<Range> ranges;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      total += tensors[i].count;
      for (std::uint64_t b = 0; b < tensors[i].count; b += kChunk)
        ranges.push_back({i, b, std::min(tensors[i].count, b + kChunk)});
    }
    std::vector<TensorStats> partial(ranges.size());
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t r; (r = next.fetch_add(1)) < ranges.size();)
        partial[r] = scan_range(tensors[ranges[r].tensor], ranges[r].begin, ranges[r].end);
    };
    const std::size_t n_threads =
        total < kInlineWork ? 1 : std::min<std::size_t>(threads_, ranges.size());
    if (n_threads <= 1) {
      work();
    } else {
      std::vector<std::jthread> pool;
      for (std::size_t t = 1; t < n_threads; ++t) pool.emplace_back(work);
      work();
    }  // the jthreads join here
    std::vector<TensorStats> out(tensors.size());
    for (std::size_t r = 0; r < ranges.size(); ++r)
      out[ranges[r].tensor] = merge(out[ranges[r].tensor], partial[r]);
    return out;
  }

  std::string describe() const override {
    return "cpu (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
  }

 private:
  static unsigned default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }
  unsigned threads_;
};

}  // namespace

std::unique_ptr<Scanner> make_cpu_scanner(unsigned threads) {
  return std::make_unique<CpuScanner>(threads);
}

}  // namespace gpudiag::numerics
