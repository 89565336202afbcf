// --preflight (preflight_report.h): the check's JSON report read bounded and
// checked field by field, and the slowness it judged said in its numbers.
#include "launch/preflight_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/text.h"

namespace gpudiag::launch {

namespace {

constexpr int kMaxDepth = 32;            // the check document nests 6 deep
constexpr std::size_t kMaxFindings = 4;  // then "and N more"
constexpr std::size_t kWordsMax = 120;   // a host or model name, as said

using nlohmann::json;

PreflightReport not_judged(std::string why) {
  PreflightReport r;
  r.not_judged = std::move(why);
  return r;
}

/// A finite number in [0, max), or NAN.
double report_number(const json& j, const char* key, double max) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return NAN;
  const double v = it->get<double>();
  return std::isfinite(v) && v >= 0 && v < max ? v : NAN;
}

std::string report_words(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string()
             ? clean_text(it->get_ref<const std::string&>().substr(0, kWordsMax))
             : std::string();
}

bool report_is_true(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string report_fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

/// "412.3 TFLOP/s"; below one TFLOP/s (a CPU) in GFLOP/s, as the check says it.
std::string report_rate(double tflops) {
  return tflops >= 1 ? report_fixed1(tflops) + " TFLOP/s" : report_fixed1(tflops * 1000) + " GFLOP/s";
}

/// "compute SLOW rank 3 [node1-3]: 180.0 TFLOP/s, 45% of the median of its
/// model, NVIDIA H200 (400.0 TFLOP/s)" for each rank the check judged slow.
void compute_findings(const json& doc, std::vector<std::string>& out) {
  const auto c = doc.find("compute");
  if (c == doc.end() || !c->is_object() || !report_is_true(*c, "rates_judged")) return;
  const auto ranks = doc.find("ranks");
  if (ranks == doc.end() || !ranks->is_array()) return;
  struct Rank {
    long long rank;
    std::string host, model;
    long long local;
    double tflops;
    bool slow;
  };
  std::vector<Rank> rows;
  for (const auto& r : *ranks) {
    if (!r.is_object()) continue;
    const auto rc = r.find("compute");
    if (rc == r.end() || !rc->is_object()) continue;
    const std::string verdict = report_words(*rc, "verdict");
    const double tflops = report_number(*rc, "tflops", 1e7);
    const double rank = report_number(r, "rank", 1e9), local = report_number(r, "local_rank", 1e9);
    if (std::isnan(tflops) || std::isnan(rank) || (verdict != "ok" && verdict != "slow")) continue;
    rows.push_back({static_cast<long long>(rank), report_words(r, "host"), report_words(*rc, "model"),
                    std::isnan(local) ? -1 : static_cast<long long>(local), tflops,
                    verdict == "slow" && report_is_true(*rc, "rate_judged")});
  }
  for (const auto& r : rows) {
    if (!r.slow) continue;
    std::vector<double> peers;  // the median the check compared it with
    for (const auto& p : rows)
      if (p.model == r.model && p.tflops > 0) peers.push_back(p.tflops);
    std::sort(peers.begin(), peers.end());
    const std::size_t n = peers.size();
    const double median = n == 0 ? 0 : n % 2 ? peers[n / 2] : (peers[n / 2 - 1] + peers[n / 2]) / 2;
    std::string s = "compute SLOW rank " + std::to_string(r.rank);
    if (!r.host.empty())
      s += " [" + r.host + (r.local >= 0 ? "-" + std::to_string(r.local) : "") + "]";
    s += ": " + report_rate(r.tflops);
    if (median > 0)
      s += ", " + std::to_string(static_cast<int>(100 * r.tflops / median)) +
           "% of the median of its model" + (r.model.empty() ? "" : ", " + r.model) + " (" +
           report_rate(median) + ")";
    out.push_back(std::move(s));
  }
}

/// "all-reduce busbw 120.0 GB/s, WARN below 80% of 195.0 GB/s (62%; H100 SXM, ...)".
void busbw_finding(const json& doc, std::vector<std::string>& out) {
  const auto b = doc.find("expected_busbw");
  if (b == doc.end() || !b->is_object() || report_words(*b, "verdict") != "WARN") return;
  const double measured = report_number(*b, "measured_gbps", 1e7);
  const double expected = report_number(*b, "expected_gbps", 1e7);
  const double percent = report_number(*b, "percent", 1e4);
  const std::string basis = report_words(*b, "basis");
  std::string s = "all-reduce busbw " + (std::isnan(measured) ? "?" : report_fixed1(measured)) +
                  " GB/s, WARN below 80% of " + (std::isnan(expected) ? "?" : report_fixed1(expected)) +
                  " GB/s";
  if (!std::isnan(percent) || !basis.empty())
    s += " (" + (std::isnan(percent) ? "" : std::to_string(static_cast<int>(percent)) + "%") +
         (!std::isnan(percent) && !basis.empty() ? "; " : "") + basis + ")";
  out.push_back(std::move(s));
}

}  // namespace

PreflightReport preflight_report_from_text(std::string_view text) {
  if (text.size() > kPreflightReportMax)
    return not_judged("its report is over " + std::to_string(kPreflightReportMax) + " bytes");
  if (json_nesting(text) > kMaxDepth) return not_judged("its report nests too deep");
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return not_judged("its report is not JSON");
  if (report_words(doc, "schema") != "gpudiag-check/1")
    return not_judged("its report is not a gpudiag-check/1 document");
  PreflightReport r;
  r.judged = true;
  std::vector<std::string> found;
  compute_findings(doc, found);
  busbw_finding(doc, found);
  const std::size_t more = found.size() > kMaxFindings ? found.size() - kMaxFindings : 0;
  found.resize(found.size() - more);
  if (more) found.push_back("and " + std::to_string(more) + " more");
  r.slow = std::move(found);
  return r;
}

PreflightReport read_preflight_report(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return not_judged(std::string("its report was not written (") + std::strerror(errno) + ")");
  struct stat st {};
  std::string text;
  bool bad = ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode);
  if (!bad) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      if (text.size() > kPreflightReportMax) break;  // judged oversized below
    }
  }
  ::close(fd);
  if (bad) return not_judged("its report is not a regular file");
  return preflight_report_from_text(text);
}

}  // namespace gpudiag::launch
