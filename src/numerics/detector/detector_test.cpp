// The detector replay on hand-built batches. Expected texts follow the
// reference detector's printing rules (see detector.h); the integration test
// test_scan_torch.py compares against a live hook-based detector.
#include "numerics/detector/detector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace gpudiag::numerics {
namespace {

TensorStats ok(double lo, double hi) {
  TensorStats s;
  s.count = 4;
  s.abs_min = lo;
  s.abs_max = hi;
  return s;
}

TensorStats with_inf() {
  TensorStats s = ok(0, INFINITY);
  s.pos_inf = 1;
  return s;
}

TensorStats with_nan() {
  TensorStats s = ok(NAN, NAN);
  s.nan = 2;
  return s;
}

/// A batch under construction with its stats.
struct B {
  Batch batch;
  std::vector<TensorStats> stats;

  explicit B(std::uint64_t n) { batch.number = n; }
  B& frame(const std::string& module, const std::string& cls,
           const std::vector<std::pair<std::string, std::optional<TensorStats>>>& entries) {
    Frame f{batch.frames.size(), module, cls, {}};
    for (const auto& [label, s] : entries) {
      Entry e{label, s ? EntryKind::tensor : EntryKind::none, stats.size(), nullptr};
      if (s) stats.push_back(*s);
      f.entries.push_back(e);
    }
    batch.frames.push_back(std::move(f));
    return *this;
  }
};

const std::string kStart0 =
    "\n\n                  *** Starting batch number=0 ***\nabs min  abs max  metadata\n";
const std::string kStart1 =
    "\n\n                  *** Starting batch number=1 ***\nabs min  abs max  metadata\n";

B batch0() {
  return std::move(
      B(0).frame("lin", "Linear",
                 {{"weight", ok(1, 2)}, {"input[0]", ok(0.5, 3)}, {"output", ok(0, 6)}})
          .frame("", "Model", {{"input[0]", ok(0.5, 3)}, {"output", ok(0, 6)}}));
}
const std::string kB0F0 = kStart0 +
                          "                  lin Linear\n"
                          "1.00e+00 2.00e+00 weight\n"
                          "5.00e-01 3.00e+00 input[0]\n"
                          "0.00e+00 6.00e+00 output";
const std::string kB0F1 =
    "                   Model\n"
    "5.00e-01 3.00e+00 input[0]\n"
    "0.00e+00 6.00e+00 output";

TEST(Detector, DetectionPrintsTheLastFramesAcrossBatches) {
  std::ostringstream out;
  Detector d({3, {}, {}}, out);
  auto b0 = batch0();
  EXPECT_TRUE(d.feed(b0.batch, b0.stats));
  EXPECT_EQ(out.str(), "");  // detection mode prints nothing until it detects
  auto b1 = B(1).frame("lin", "Linear",
                       {{"weight", ok(1, 2)}, {"input[0]", ok(0.5, 3)}, {"output", with_inf()}});
  EXPECT_FALSE(d.feed(b1.batch, b1.stats));
  const std::string b1f0 = kStart1 +
                           "                  lin Linear\n"
                           "1.00e+00 2.00e+00 weight\n"
                           "5.00e-01 3.00e+00 input[0]\n"
                           "0.00e+00      inf output";
  EXPECT_EQ(out.str(),
            "output has infs\n\nDetected inf/nan during batch_number=1\nLast 3 forward frames:\n"
            "abs min  abs max  metadata\n" +
                kB0F0 + "\n" + kB0F1 + "\n" + b1f0 + "\n\n\n\n");
  EXPECT_EQ(d.result().stop, StopReason::detected);
  ASSERT_TRUE(d.result().first);
  EXPECT_EQ(d.result().first->label, "output");
  EXPECT_EQ(d.result().first->batch, 1u);
}

TEST(Detector, MaxFramesDropsTheOldestAndNoneIsRightAligned) {
  std::ostringstream out;
  Detector d({1, {}, {}}, out);
  auto b = B(4).frame("a", "A", {{"input[0]", ok(1, 1)}})
               .frame("b", "B", {{"output[0]", with_nan()}, {"output[1]", {}}});
  EXPECT_FALSE(d.feed(b.batch, b.stats));
  EXPECT_EQ(out.str(),
            "output[0] has nans\n\nDetected inf/nan during batch_number=4\nLast 1 forward frames:\n"
            "abs min  abs max  metadata\n"
            "                  b B\n"
            "     nan      nan output[0]\n"
            "             None output[1]\n\n\n\n");
}

TEST(Detector, InfInTheRootFrameReportsTheNextBatchNumber) {
  std::ostringstream out;
  Detector d({21, {}, {}}, out);
  auto b = B(0).frame("", "Model", {{"output", with_inf()}});
  d.feed(b.batch, b.stats);
  EXPECT_NE(out.str().find("Detected inf/nan during batch_number=1\n"), std::string::npos);
}

TEST(Detector, TraceBatchesPrintEveryFrameAndAbortStops) {
  std::ostringstream out;
  Detector d({21, {0}, 0}, out);
  auto b0 = batch0();
  EXPECT_FALSE(d.feed(b0.batch, b0.stats));  // aborted after batch 0
  EXPECT_EQ(out.str(), kB0F0 + "\n" + kB0F1 + "\n");
  EXPECT_EQ(d.result().stop, StopReason::aborted);
  EXPECT_EQ(d.result().batch_number, 1u);
  auto b1 = batch0();
  b1.batch.number = 1;
  EXPECT_FALSE(d.feed(b1.batch, b1.stats));
}

TEST(Detector, AbortBeforeABatchTheDumpLacks) {
  std::ostringstream out;
  Detector d({21, {}, 2}, out);
  auto b = batch0();
  b.batch.number = 5;
  EXPECT_FALSE(d.feed(b.batch, {}));
  EXPECT_EQ(d.result().stop, StopReason::aborted);
  EXPECT_EQ(d.result().batch_number, 3u);
  EXPECT_EQ(out.str(), "");
}

TEST(Detector, DetectionInATracedBatchIsReportedAtTheFirstUntracedFrame) {
  std::ostringstream out;
  Detector d({21, {0}, {}}, out);
  auto b0 = B(0).frame("", "Model", {{"output", with_nan()}});
  EXPECT_TRUE(d.feed(b0.batch, b0.stats));
  auto b1 = B(1).frame("lin", "Linear", {{"output", ok(1, 2)}});
  EXPECT_FALSE(d.feed(b1.batch, b1.stats));
  EXPECT_EQ(out.str(), "output has nans\n" + kStart0 +
                           "                   Model\n"
                           "     nan      nan output\n"
                           "\nDetected inf/nan during batch_number=1\nLast 1 forward frames:\n"
                           "abs min  abs max  metadata\n" +
                           kStart1 +
                           "                  lin Linear\n"
                           "1.00e+00 2.00e+00 output\n\n\n\n");
}

TEST(Detector, ZeroMaxFramesKeepsNothing) {
  std::ostringstream out;
  Detector d({0, {}, {}}, out);
  auto b = B(0).frame("x", "X", {{"output", with_inf()}});
  d.feed(b.batch, b.stats);
  EXPECT_EQ(out.str(),
            "output has infs\n\nDetected inf/nan during batch_number=0\nLast 0 forward frames:\n"
            "abs min  abs max  metadata\n\n\n\n\n");
}

}  // namespace
}  // namespace gpudiag::numerics
