// The textfile format as node_exporter's parser reads it: HELP and TYPE once
// per family, samples together, labels escaped, non-finite values left out;
// and the atomic write (a reader sees the old file or the new one). The real
// node_exporter reads these files in tests/integration/test_prometheus.py.
// The hardware gauges per finding class, from a check's and info's documents.
#include "report/prometheus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/prom_reports.h"
#include "util/error.h"

namespace gpudiag {
namespace {

TEST(Prometheus, FamiliesStayTogetherAndLabelsAreEscaped) {
  PromText p;
  p.gauge("gpudiag_a", "first", {{"host", "n1"}}, 1.5);
  p.gauge("gpudiag_b", "second\nline", {}, 2);
  p.gauge("gpudiag_a", "ignored", {{"host", "n\"2\\\n"}}, 3e9);
  p.gauge("gpudiag_a", "", {{"host", "n3"}}, std::nan(""));  // left out
  p.gauge("gpudiag_a", "", {{"host", "n3"}}, INFINITY);      // left out
  EXPECT_EQ(p.text(),
            "# HELP gpudiag_a first\n# TYPE gpudiag_a gauge\n"
            "gpudiag_a{host=\"n1\"} 1.5\n"
            "gpudiag_a{host=\"n\\\"2\\\\\\n\"} 3e+09\n"
            "# HELP gpudiag_b second line\n# TYPE gpudiag_b gauge\ngpudiag_b 2\n");
  EXPECT_THROW(p.gauge("9bad", "", {}, 1), Error);
  EXPECT_THROW(p.gauge("gpudiag_c", "", {{"bad-label", "x"}}, 1), Error);
}

TEST(Prometheus, WrittenWholeByRename) {
  const auto dir = std::filesystem::temp_directory_path() / ("prom" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "gpudiag.prom").string();
  EXPECT_EQ(write_prometheus_file(path, "old 1\n"), 0);
  EXPECT_EQ(write_prometheus_file(path, "new 2\n"), 0);
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  EXPECT_EQ(s.str(), "new 2\n");
  int entries = 0;  // no temporary file left behind
  for (auto& e : std::filesystem::directory_iterator(dir)) ++entries, (void)e;
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(write_prometheus_file((dir / "no" / "such" / "x.prom").string(), "x 1\n"),
            static_cast<int>(ExitCode::usage));
  // A link at the path is refused and stays a link (a rename would replace it).
  const std::string link = (dir / "link.prom").string();
  std::filesystem::create_symlink(path, link);
  EXPECT_EQ(write_prometheus_file(link, "x 1\n"), static_cast<int>(ExitCode::usage));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  std::filesystem::remove(link);
  std::filesystem::remove_all(dir);
}

TEST(Prometheus, HardwareFindingsByClassPerNode) {
  const nlohmann::json check = {
      {"ok", false},
      {"ranks",
       {{{"rank", 0}, {"host", "n1"}, {"ok", false}, {"hardware", "Xid 79 (GPU fallen off the bus) on 0000:3b:00"},
         {"hw_findings", {{"node/reboot", 1}, {"workload/none", 4}}}},
        {{"rank", 1}, {"host", "n1"}, {"ok", false}, {"hardware", "Xid 79"}, {"hw_findings", {{"node/reboot", 1}}}},
        {{"rank", 2}, {"host", "n2"}, {"ok", true}, {"hw_findings", nlohmann::json::object()}},
        {{"rank", 3}, {"host", "n3"}, {"ok", true}, {"hw_findings", {{"bogus", 1}, {"node/reboot", -2}}}}}}};
  const std::string t = prometheus_from_report("gpudiag-check/1", check, "");
  EXPECT_NE(t.find("gpudiag_hw_findings{host=\"n1\",class=\"node\",action=\"reboot\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("gpudiag_hw_findings{host=\"n1\",class=\"workload\",action=\"none\"} 4\n"), std::string::npos);
  EXPECT_NE(t.find("gpudiag_hw_node_unfit{host=\"n1\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("gpudiag_hw_node_unfit{host=\"n2\"} 0\n"), std::string::npos);  // healthy: no finding, fit
  EXPECT_EQ(t.find("gpudiag_hw_findings{host=\"n2\""), std::string::npos);
  EXPECT_EQ(t.find("gpudiag_hw_findings{host=\"n3\""), std::string::npos);  // out of shape: left out
  EXPECT_EQ(t.find("# TYPE gpudiag_hw_findings gauge"), t.rfind("# TYPE gpudiag_hw_findings gauge"));
  const nlohmann::json info = {{"host", "n4"},
                               {"hardware",
                                {{"verdict", "fit"},
                                 {"findings", {{{"class", "notice"}, {"action", "none"}},
                                               {{"class", "notice"}, {"action", "none"}},
                                               {{"class", "node"}, {"action", "check_cable"}, {"unfit", false}}}}}}};
  const std::string i = prometheus_from_report("gpudiag-info/1", info, "");
  EXPECT_NE(i.find("report=\"info\""), std::string::npos) << i;
  EXPECT_NE(i.find("gpudiag_hw_findings{host=\"n4\",class=\"notice\",action=\"none\"} 2\n"), std::string::npos) << i;
  EXPECT_NE(i.find("gpudiag_hw_findings{host=\"n4\",class=\"node\",action=\"check_cable\"} 1\n"), std::string::npos);
  EXPECT_NE(i.find("gpudiag_hw_node_unfit{host=\"n4\"} 0\n"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag
