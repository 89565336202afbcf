// The textfile format as node_exporter's parser reads it: HELP and TYPE once
// per family, samples together, labels escaped, non-finite values left out;
// and the atomic write (a reader sees the old file or the new one). The real
// node_exporter reads these files in tests/integration/test_prometheus.py.
#include "report/prometheus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace gpudiag
