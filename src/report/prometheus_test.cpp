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
  write_prometheus_file(path, "old 1\n");
  write_prometheus_file(path, "new 2\n");
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  EXPECT_EQ(s.str(), "new 2\n");
  int entries = 0;  // no temporary file left behind
  for (auto& e : std::filesystem::directory_iterator(dir)) ++entries, (void)e;
  EXPECT_EQ(entries, 1);
  try {
    write_prometheus_file((dir / "no" / "such" / "x.prom").string(), "x 1\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("cannot create it"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpudiag
