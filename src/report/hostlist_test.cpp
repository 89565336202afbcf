// SLURM hostlist compression: ranges, padding, groups by width, names without
// a number, duplicates, and the order a reader sees. (test_sweep.py checks the
// output against SLURM's own `scontrol show hostnames`.)
#include "report/hostlist.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

TEST(Hostlist, RangesKeepTheirPadding) {
  EXPECT_EQ(slurm_hostlist({"node003", "node017"}), "node[003,017]");
  EXPECT_EQ(slurm_hostlist({"node004", "node003", "node017", "node005"}), "node[003-005,017]");
  EXPECT_EQ(slurm_hostlist({"node1"}), "node1");
  EXPECT_EQ(slurm_hostlist({}), "");
  EXPECT_EQ(slurm_hostlist({"n9", "n10", "n11"}), "n[9-11]");
}

TEST(Hostlist, WidthsPrefixesAndPlainNamesAreGroupsOfTheirOwn) {
  EXPECT_EQ(slurm_hostlist({"gpu01", "gpu1", "gpu02", "login", "cpu-a7", "gpu01", "gpu2"}),
            "gpu[01-02],gpu[1-2],login,cpu-a7");
  EXPECT_EQ(slurm_hostlist({"n0", "n1", "n001", "n010"}), "n[0-1],n[001,010]");
  EXPECT_EQ(slurm_hostlist({"rack1-node02", "rack2-node01", "rack1-node01"}),
            "rack1-node[01-02],rack2-node01");
  // A number too long for a range is kept as written.
  EXPECT_EQ(slurm_hostlist({"h1234567890123456789012"}), "h1234567890123456789012");
}

TEST(Hostlist, NamesThatWouldBreakTheSyntaxAreRefused) {
  EXPECT_TRUE(hostlist_safe("node-01.cluster"));
  for (const char* bad : {"", "a,b", "a[1]", "a b", "a\nb"}) EXPECT_FALSE(hostlist_safe(bad)) << bad;
}

}  // namespace
}  // namespace gpudiag
