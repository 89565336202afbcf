// The bench loop's rows say when a figure was measured without NCCL's timing
// gate (Communicator::ungated(): the gate expired, or there was none, as
// under CUDA_LAUNCH_BLOCKING=1): the row carries the reason rank 0 prints
// under it and writes into the JSON; a gated row carries none.
#include "bench/engine.h"

#include <gtest/gtest.h>

#include "comm/communicator.h"

namespace gpudiag {
namespace {

/// One rank whose collectives leave the data as it is, and whose timed runs
/// report `why` as the reason they were ungated.
class OneRank : public Communicator {
 public:
  explicit OneRank(std::string why) : self_(make_self_communicator("test")), why_(std::move(why)) {}
  std::string name() const override { return "test"; }
  void all_reduce_sum(float* d, std::size_t n, Deadline t) override { self_->all_reduce_sum(d, n, t); }
  void all_gather(float* d, std::size_t n, Deadline t) override { self_->all_gather(d, n, t); }
  void broadcast(float* d, std::size_t n, int r, Deadline t) override { self_->broadcast(d, n, r, t); }
  void barrier(Deadline t) override { self_->barrier(t); }
  void send_recv(int p, const float* o, float* i, std::size_t n, Deadline t) override {
    self_->send_recv(p, o, i, n, t);
  }
  void run(const CollCall& c, Deadline t) override { self_->run(c, t); }
  std::vector<double> run_timed(const CollCall& c, int iters, bool blocking, Deadline t,
                                bool per_call) override {
    return self_->run_timed(c, iters, blocking, t, per_call);
  }
  std::string ungated() const override { return why_; }

 private:
  std::unique_ptr<Communicator> self_;
  std::string why_;
};

struct Rows : BenchSink {
  void row(const BenchRow& r) override { rows.push_back(r); }
  std::vector<BenchRow> rows;
};

std::vector<BenchRow> bench(const std::string& why) {
  OneRank comm(why);
  auto ws = make_host_workspace();
  Rows sink;
  BenchPlan plan;
  plan.sizes = {1024, 4096};
  plan.iters = 3;
  run_bench(plan, BenchContext{comm, *ws, 0, 1, 10, &sink});
  return sink.rows;
}

TEST(BenchEngine, ARowMeasuredWithoutTheGateSaysWhy) {
  const auto rows = bench("no stream gate under CUDA_LAUNCH_BLOCKING=1");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) EXPECT_EQ(r.ungated, "no stream gate under CUDA_LAUNCH_BLOCKING=1");
}

TEST(BenchEngine, AGatedRowSaysNothing) {
  for (const auto& r : bench("")) EXPECT_EQ(r.ungated, "");
}

}  // namespace
}  // namespace gpudiag
