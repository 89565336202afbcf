// SLURM hostlist compression: ranges, padding, groups by width, names without
// a number, duplicates, and the order a reader sees. (test_sweep.py checks the
// output against SLURM's own `scontrol show hostnames`.)
#include "report/hostlist.h"
#include "util/error.h"

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

// Each expected list is what `scontrol show hostnames` printed for the same text
// (SLURM 23, Debian's slurm-wlm).
TEST(HostlistExpand, ReadsWhatScontrolReads) {
  EXPECT_EQ(expand_slurm_hostlist("node[08-10],rack[1-2]-n[01-02],x,n[9-11],a[1-3,5]"),
            (std::vector<std::string>{"node08", "node09", "node10", "rack1-n01", "rack1-n02",
                                      "rack2-n01", "rack2-n02", "x", "n9", "n10", "n11", "a1",
                                      "a2", "a3", "a5"}));
  EXPECT_EQ(expand_slurm_hostlist("h1,h1,h[1-2]"), (std::vector<std::string>{"h1", "h2"}));
  EXPECT_TRUE(expand_slurm_hostlist("").empty());
}

TEST(HostlistExpand, CompressionReadsBack) {
  const std::vector<std::string> hosts{"node003", "node004", "node017", "gpu9", "gpu10", "login"};
  EXPECT_EQ(expand_slurm_hostlist(slurm_hostlist(hosts)),
            (std::vector<std::string>{"node003", "node004", "node017", "gpu9", "gpu10", "login"}));
}

TEST(HostlistExpand, MalformedAndHugeListsAreOneError) {
  for (const char* bad : {"n[1-", "n]1", "n[[1]]", "n[a-b]", "n[5-1]", "n[1-999999999999]",
                          "n[0-999][0-999]", "n[1,,2]", "a b"}) {
    try {
      expand_slurm_hostlist(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("host list"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gpudiag
