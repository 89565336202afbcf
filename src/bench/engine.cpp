// The bench loop (engine.h). Buffers are allocated once for the largest
// size of the plan; every size uses their beginning, as nccl-tests does.
#include "bench/engine.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "bench/pattern.h"
#include "bench/sizes.h"
#include "util/error.h"

namespace gpudiag {

namespace {

/// What each rank contributes to the all-gather after a row: fixed size,
/// a whole number of floats (the all-gather moves floats; bytes are bytes).
struct Packed {
  double mean[2], p50[2], p99[2];
  std::int64_t wrong[2];
  char first_wrong[176];
  char ungated[48];  ///< Communicator::ungated() of either half, "" when gated
};
static_assert(sizeof(Packed) % sizeof(float) == 0);
constexpr std::size_t kPackedFloats = sizeof(Packed) / sizeof(float);

struct Stats {
  double mean = 0, p50 = 0, p99 = 0;
};

Stats stats_of(std::vector<double> t) {
  Stats s;
  if (t.empty()) return s;
  s.mean = std::accumulate(t.begin(), t.end(), 0.0) / static_cast<double>(t.size());
  std::sort(t.begin(), t.end());
  s.p50 = t[t.size() / 2];
  s.p99 = t[std::min(t.size() - 1, (t.size() * 99) / 100)];
  return s;
}

class Runner {
 public:
  Runner(const BenchPlan& plan, const BenchContext& ctx) : plan_(plan), ctx_(ctx) {
    for (DType t : plan.types)
      for (std::uint64_t size : plan.sizes) {
        const CollSizes cs = coll_sizes(plan.coll, size, ctx.nranks, t);
        const std::size_t es = dtype_size(t);
        send_bytes_ = std::max(send_bytes_, cs.send_count * es);
        recv_bytes_ = std::max({recv_bytes_, cs.recv_count * es, cs.send_count * es});
      }
    send_ = ctx.workspace.allocate_bytes(std::max<std::size_t>(send_bytes_, 16));
    recv_ = ctx.workspace.allocate_bytes(std::max<std::size_t>(recv_bytes_, 16));
    host_.resize(std::max(send_bytes_, recv_bytes_) + 16);
    gather_ = ctx.workspace.allocate(kPackedFloats * ctx.nranks);
    gathered_.resize(ctx.nranks);
    if (plan.per_iter && per_iter_fits(ctx.nranks, plan.iters)) {
      iter_floats_ = 2 * static_cast<std::size_t>(plan.iters);
      iters_ = ctx.workspace.allocate(iter_floats_ * ctx.nranks);
      iter_host_.resize(iter_floats_ * ctx.nranks);
    }
  }
  ~Runner() {
    for (void* p : {send_, recv_}) ctx_.workspace.release(static_cast<float*>(p));
    ctx_.workspace.release(gather_);
    if (iters_) ctx_.workspace.release(iters_);
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  void run() {
    const bool reduces = coll_reduces(plan_.coll) || plan_.coll == Coll::sendrecv;
    const std::vector<RedOp> ops = reduces ? plan_.ops : std::vector<RedOp>{RedOp::sum};
    const std::vector<int> roots = coll_has_root(plan_.coll) ? plan_.roots : std::vector<int>{-1};
    for (std::int64_t cycle = 0; cycle < plan_.cycles; ++cycle)
      for (DType t : plan_.types)
        for (RedOp op : ops)
          for (int root : roots)
            for (std::uint64_t size : plan_.sizes) {
              BenchRow row = measure(t, op, root, size);
              row.redop = reduces ? redop_name(op) : "none";
              if (ctx_.sink) ctx_.sink->row(row);
            }
  }

 private:
  Deadline wait() const { return Deadline::after_seconds(ctx_.timeout_s); }

  BenchRow measure(DType t, RedOp op, int root, std::uint64_t size) {
    const int n = ctx_.nranks, r = ctx_.rank;
    const CollSizes cs = coll_sizes(plan_.coll, size, n, t);
    const std::size_t es = dtype_size(t);
    BenchRow row;
    row.coll = plan_.coll;
    row.type = t;
    row.root = root;
    row.size = cs.row_bytes;
    row.count = cs.row_count;
    PatternCase pc{plan_.coll, t, op, std::max(root, 0), n, cs.param_count};
    Packed mine{};
    for (int in_place = 0; in_place < 2; ++in_place) {
      CollCall call{plan_.coll, t, op, std::max(root, 0), send_, recv_, cs.param_count};
      auto* base = static_cast<char*>(recv_);
      if (in_place) {
        call.send = base + cs.send_inplace_offset * r * es;
        call.recv = base + cs.recv_inplace_offset * r * es;
      }
      // Timed on the pattern, not on whatever the buffer held: garbage
      // floats may be subnormal, which slows the host backends' arithmetic.
      upload_pattern(pc, call, cs.send_count * es, false);
      const auto tw = Deadline::Clock::now();
      for (int i = 0; i < plan_.warmup; ++i) ctx_.comm.run(call, wait());
      const double per_op = plan_.warmup > 0 ? seconds_since(tw) / plan_.warmup : 0;
      ctx_.comm.barrier(wait());
      // Each call timed by events of its own only with -I, as nccl-tests:
      // an event per call slows a loop that is as fast as the host launches.
      const auto times = ctx_.comm.run_timed(
          call, plan_.iters, plan_.blocking,
          Deadline::after_seconds(ctx_.timeout_s + 2 * per_op * plan_.iters), iters_ != nullptr);
      Stats s = stats_of(times);
      if (!iters_) s.p50 = s.p99 = -1;  // unknown: the loop's mean only
      if (iters_)  // -I: this rank's iterations, in microseconds
        for (std::size_t i = 0; i < times.size() && i < iter_floats_ / 2; ++i)
          iter_host_[i + in_place * (iter_floats_ / 2)] = static_cast<float>(times[i] * 1e6);
      if (const std::string why = ctx_.comm.ungated(); !why.empty() && !mine.ungated[0])
        std::strncpy(mine.ungated, why.c_str(), sizeof mine.ungated - 1);
      mine.mean[in_place] = s.mean;
      mine.p50[in_place] = s.p50;
      mine.p99[in_place] = s.p99;
      mine.wrong[in_place] = 0;
      // nccl-tests reports no errors for alltoall and sendrecv in place
      // (alltoall.cu, sendrecv.cu: reportErrors = in_place ? 0 : 1): there the
      // send and receive of one block share memory, and NCCL gives no order
      // between a peer's write and this rank's read, so the result is
      // undefined (seen on NCCL 2.28 on an H100). `#wrong` is N/A there.
      const bool unchecked = in_place && (plan_.coll == Coll::alltoall ||
                                          plan_.coll == Coll::sendrecv);
      for (int c = 0; c < plan_.check && !unchecked; ++c) {
        upload_pattern(pc, call, cs.send_count * es, plan_.corrupt_rank == r);
        ctx_.comm.run(call, wait());
        if (plan_.coll == Coll::reduce && r != pc.root) continue;  // nothing lands here
        ctx_.workspace.download_bytes(host_.data(), call.recv, cs.recv_count * es);
        const WrongReport w = check_recv(host_.data(), pc, r);
        mine.wrong[in_place] += static_cast<std::int64_t>(w.wrong);
        if (w.wrong && !mine.first_wrong[0]) {
          const std::string text =
              fmt::format("element {} of the {} result: expected {:g}, got {:g}{}", w.first_index,
                          in_place ? "in-place" : "out-of-place", w.expected, w.got,
                          w.suspect.empty() ? "" : " (" + w.suspect + ")");
          std::strncpy(mine.first_wrong, text.c_str(), sizeof mine.first_wrong - 1);
        }
      }
    }
    gather(mine);
    fill_row(row, cs, t);
    if (iters_) gather_iterations(row);
    return row;
  }

  /// The pattern (or, for the corrupting test rank, zeros) into the call's
  /// send buffer; in place that is inside the receive buffer.
  void upload_pattern(const PatternCase& pc, const CollCall& call, std::size_t bytes,
                      bool corrupt) {
    if (!bytes) return;
    if (corrupt)
      std::memset(host_.data(), 0, bytes);
    else
      fill_send(host_.data(), pc, ctx_.rank);
    ctx_.workspace.upload_bytes(const_cast<void*>(call.send), host_.data(), bytes);
  }

  /// Every rank's Packed, over the communicator (no store traffic).
  void gather(const Packed& mine) {
    ctx_.workspace.upload_bytes(gather_ + kPackedFloats * ctx_.rank, &mine, sizeof mine);
    ctx_.comm.all_gather(gather_, kPackedFloats, wait());
    ctx_.workspace.download_bytes(gathered_.data(), gather_, sizeof(Packed) * ctx_.nranks);
  }

  /// -I: every rank's iteration times (this rank's are at the front of
  /// iter_host_) to rank 0's row, over the communicator.
  void gather_iterations(BenchRow& row) {
    const std::size_t k = iter_floats_, half = k / 2;
    ctx_.workspace.upload_bytes(iters_ + k * ctx_.rank, iter_host_.data(), k * sizeof(float));
    ctx_.comm.all_gather(iters_, k, wait());
    if (!ctx_.sink) return;
    ctx_.workspace.download_bytes(iter_host_.data(), iters_, k * ctx_.nranks * sizeof(float));
    for (int h = 0; h < 2; ++h) {
      row.iter_us[h].resize(ctx_.nranks);
      for (int q = 0; q < ctx_.nranks; ++q) {
        const float* from = iter_host_.data() + k * q + h * half;
        row.iter_us[h][q].assign(from, from + half);
      }
    }
  }

  void fill_row(BenchRow& row, const CollSizes& cs, DType t) const {
    const int n = ctx_.nranks;
    for (int h = 0; h < 2; ++h) {
      double sec = 0;
      switch (plan_.average) {
        case 0: sec = gathered_[0].mean[h]; break;
        case 2: sec = gathered_[0].mean[h];
          for (const auto& p : gathered_) sec = std::min(sec, p.mean[h]);
          break;
        case 3:
          for (const auto& p : gathered_) sec = std::max(sec, p.mean[h]);
          break;
        default:
          for (const auto& p : gathered_) sec += p.mean[h];
          sec /= n;
      }
      const Bandwidth bw = coll_bandwidth(plan_.coll, cs.param_count, t, sec, n);
      row.half[h].time_us = sec * 1e6;
      row.half[h].algbw = bw.algbw;
      row.half[h].busbw = bw.busbw;
      const bool unchecked =
          h == 1 && (plan_.coll == Coll::alltoall || plan_.coll == Coll::sendrecv);
      if (plan_.check > 0 && !unchecked) {
        std::int64_t wrong = 0;
        for (const auto& p : gathered_) wrong += std::max<std::int64_t>(0, p.wrong[h]);
        row.half[h].wrong = wrong;
      }
    }
    for (int q = 0; q < n && row.ungated.empty(); ++q)
      row.ungated.assign(gathered_[q].ungated,
                         strnlen(gathered_[q].ungated, sizeof gathered_[q].ungated));
    if (!ctx_.sink) return;
    row.ranks.resize(n);
    for (int q = 0; q < n; ++q) {
      const Packed& p = gathered_[q];
      auto& m = row.ranks[q];
      for (int h = 0; h < 2; ++h) {
        m.mean_s[h] = p.mean[h];
        m.p50_s[h] = p.p50[h];
        m.p99_s[h] = p.p99[h];
        m.wrong[h] = p.wrong[h];
      }
      m.first_wrong.assign(p.first_wrong, strnlen(p.first_wrong, sizeof p.first_wrong));
    }
  }

  const BenchPlan& plan_;
  const BenchContext& ctx_;
  std::size_t send_bytes_ = 0, recv_bytes_ = 0;
  void *send_ = nullptr, *recv_ = nullptr;
  float* gather_ = nullptr;
  std::vector<unsigned char> host_;
  std::vector<Packed> gathered_;
  // -I: iterations per rank, 2 x iters floats each (out of place, in place).
  float* iters_ = nullptr;
  std::size_t iter_floats_ = 0;
  std::vector<float> iter_host_;
};

}  // namespace

int test_corrupt_rank(const std::optional<std::string>& value) {
  if (!value || value->empty() || value->size() > 6) return -1;
  int r = 0;
  for (char c : *value) {
    if (c < '0' || c > '9') return -1;
    r = r * 10 + (c - '0');
  }
  return r;
}

void run_bench(const BenchPlan& plan, const BenchContext& ctx) {
  if (plan.iters < 1) throw UsageError("-n/--iters must be at least 1");
  Runner(plan, ctx).run();
}

}  // namespace gpudiag
