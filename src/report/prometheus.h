// Metrics for monitoring, in the text format node_exporter's textfile
// collector reads (`--collector.textfile.directory`): one "# HELP" and one
// "# TYPE ... gauge" line per metric, then its samples, each family's samples
// together as the format requires. Label values are escaped as the format
// says (backslash, double quote, newline); values that are not finite are
// left out rather than written as NaN, so a dashboard never plots a gap as a
// number. The file is written to a temporary name in the same directory and
// renamed over the target, so a scrape reads the old file or the new one,
// never half of one.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

using PromLabels = std::vector<std::pair<std::string, std::string>>;

class PromText {
 public:
  /// Adds a sample of gauge `name` (gpudiag_... , [a-zA-Z_:][a-zA-Z0-9_:]*);
  /// `help` is kept from the first call for that name.
  void gauge(const std::string& name, const std::string& help, const PromLabels& labels,
             double value);
  /// The whole file, families in the order first added.
  std::string text() const;
  bool empty() const { return order_.empty(); }

 private:
  struct Family {
    std::string help;
    std::vector<std::string> samples;
  };
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

/// Label value escaping of the text format.
std::string prom_escape(const std::string& value);

/// Writes `text` to `path` whole (util/file_out.h, WriteMode::replace: a
/// fresh temporary file under a random name, then a rename; a target that is
/// not a regular file is refused). 0, or the usage exit status after one line
/// on stderr.
int write_prometheus_file(const std::string& path, const std::string& text);

/// The labels every gpudiag file carries on gpudiag_info: the report
/// ("check", "bench", "links", "sweep": node_exporter refuses one sample in
/// two files of its directory, so each file's differs), the version and the
/// NCCL loaded ("" none).
PromLabels prom_info_labels(const std::string& report, const std::string& nccl_version);

}  // namespace gpudiag
