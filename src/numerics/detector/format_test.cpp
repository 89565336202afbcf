// Spot checks of the report formatting; the integration test
// test_scan_format.py compares thousands of values with Python itself.
#include "numerics/detector/format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gpudiag::numerics {
namespace {

TEST(FormatE82, MatchesPythonOnEdgeValues) {
  EXPECT_EQ(format_e82(0.0), "0.00e+00");
  EXPECT_EQ(format_e82(-0.0), "-0.00e+00");
  EXPECT_EQ(format_e82(1.125), "1.12e+00");  // exact tie: to even
  EXPECT_EQ(format_e82(1.135), "1.14e+00");  // the double is above the tie
  EXPECT_EQ(format_e82(9.995), "9.99e+00");  // the double is below the tie
  EXPECT_EQ(format_e82(9.9951), "1.00e+01");
  EXPECT_EQ(format_e82(65504.0), "6.55e+04");
  EXPECT_EQ(format_e82(1e100), "1.00e+100");
  EXPECT_EQ(format_e82(5e-324), "4.94e-324");
  EXPECT_EQ(format_e82(-128.0), "-1.28e+02");
  EXPECT_EQ(format_e82(INFINITY), "     inf");
  EXPECT_EQ(format_e82(-INFINITY), "    -inf");
  EXPECT_EQ(format_e82(std::numeric_limits<double>::quiet_NaN()), "     nan");
  EXPECT_EQ(format_e82(-std::numeric_limits<double>::quiet_NaN()), "     nan");
}

TEST(StatsLine, PrintsLikeTheReference) {
  TensorStats s;
  s.count = 3;
  s.abs_min = 0;
  s.abs_max = INFINITY;
  s.pos_inf = 1;
  EXPECT_EQ(stats_line(s, "output"), "0.00e+00      inf output");
  EXPECT_EQ(stats_line(TensorStats{}, "input[0]"), "            empty input[0]");
  EXPECT_EQ(placeholder_line("None", "output[1]"), "             None output[1]");
  EXPECT_EQ(placeholder_line("not a tensor", "output"), "     not a tensor output");
}

}  // namespace
}  // namespace gpudiag::numerics
