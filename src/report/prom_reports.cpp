// Metrics from a report document (prom_reports.h). Values are read with
// defaults, so a field a failed job lacks leaves its metric out rather than
// writing a zero that reads as a measurement.
#include "report/prom_reports.h"

#include <spdlog/spdlog.h>

#include <map>

#include "report/prometheus.h"
#include "util/error.h"

namespace gpudiag {

namespace {

using nlohmann::json;

std::string text(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<long long>());
  return "";
}

bool number(const json& j, const char* key, double& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  out = it->get<double>();
  return true;
}

/// The gauge per finding class: gpudiag_hw_findings{host,class,action} (how
/// many distinct findings the node's kernel log and sysfs hold) and
/// gpudiag_hw_node_unfit{host}. `counts` is a record's "hw_findings" object
/// ("node/reboot": 1); a key or count out of shape is left out.
void hw_metrics(PromText& p, const std::string& host, const json& counts, bool unfit) {
  if (counts.is_object())
    for (const auto& [key, n] : counts.items()) {
      const auto slash = key.find('/');
      if (slash == std::string::npos || key.size() > 64 || !n.is_number_integer() || n.get<long long>() < 0)
        continue;
      p.gauge("gpudiag_hw_findings",
              "hardware findings of the node's kernel log and sysfs, by class (workload, notice, node) "
              "and action (docs/hardware.md)",
              {{"host", host}, {"class", key.substr(0, slash)}, {"action", key.substr(slash + 1)}},
              static_cast<double>(n.get<long long>()));
    }
  p.gauge("gpudiag_hw_node_unfit", "1 when the node's hardware evidence makes it unfit until its action is taken",
          {{"host", host}}, unfit ? 1 : 0);
}

/// A check's: one node's counts from the first of its ranks that sent them;
/// unfit when any of its ranks was failed by its hardware.
void check_hw_metrics(PromText& p, const json& ranks) {
  std::map<std::string, std::pair<json, bool>> nodes;  // host -> counts, unfit
  for (const auto& r : ranks) {
    if (!r.is_object() || !r.contains("hw_findings")) continue;
    auto& node = nodes[text(r, "host")];
    if (node.first.is_null() || node.first.empty()) node.first = r["hw_findings"];
    node.second = node.second || !text(r, "hardware").empty();
  }
  for (const auto& [host, node] : nodes) hw_metrics(p, host, node.first, node.second);
}

/// `gpudiag info --prometheus`: this node's findings (its "hardware" object).
void info_metrics(PromText& p, const json& doc) {
  const json hw = doc.value("hardware", json::object());
  json counts = json::object();
  for (const auto& f : hw.value("findings", json::array()))
    if (f.is_object()) {
      const std::string key = text(f, "class") + "/" + text(f, "action");
      counts[key] = counts.value(key, 0) + 1;
    }
  const json host = doc.value("host", json());
  hw_metrics(p, host.is_string() ? host.get<std::string>() : "", counts, hw.value("verdict", "") == "unfit");
}

/// A rank's compute phase: its rate, whether its checksums agree with its
/// model's (left out when not compared), and whether its rate is SLOW.
void compute_metrics(PromText& p, const json& r) {
  if (!r.is_object() || !r.contains("compute") || !r["compute"].is_object()) return;
  const json& c = r["compute"];
  const PromLabels who{{"host", text(r, "host")}, {"rank", text(r, "rank")}};
  double v = 0;
  if (number(c, "tflops", v) && v > 0)
    p.gauge("gpudiag_check_compute_tflops", "the rank's GEMMs of the compute phase, TFLOP/s", who, v);
  if (auto a = c.find("agrees"); a != c.end() && a->is_boolean())
    p.gauge("gpudiag_check_compute_agrees",
            "1 when the rank's GEMM checksums are those of its GPU model's other ranks", who,
            a->get<bool>() ? 1 : 0);
  if (c.value("rate_judged", false))
    p.gauge("gpudiag_check_compute_slow", "1 when the rank's rate is below 80% of its model's median",
            who, text(c, "verdict") == "slow" ? 1 : 0);
}

void check_metrics(PromText& p, const json& doc) {
  const json ranks = doc.value("ranks", json::array());
  double v = 0;
  for (const auto& r : ranks) {
    if (!r.is_object()) continue;
    const PromLabels who{{"host", text(r, "host")}, {"rank", text(r, "rank")}};
    p.gauge("gpudiag_check_rank_ok", "1 when the rank passed every phase of gpudiag check", who,
            r.value("ok", false) ? 1 : 0);
    if (r.value("ok", false) && number(r, "allreduce_busbw_gbps", v) && v > 0)
      p.gauge("gpudiag_check_allreduce_busbw_gbps", "the rank's timed all-reduce, bus bandwidth GB/s",
              who, v);
  }
  for (const auto& r : ranks) compute_metrics(p, r);
  for (const auto& r : ranks) {
    if (!r.is_object() || !r.contains("seconds") || !r["seconds"].is_object()) continue;
    for (const auto& [phase, s] : r["seconds"].items())
      if (s.is_number())
        p.gauge("gpudiag_check_phase_seconds", "wall seconds the rank spent in each phase",
                {{"host", text(r, "host")}, {"rank", text(r, "rank")}, {"phase", phase}},
                s.get<double>());
  }
  check_hw_metrics(p, ranks);
  p.gauge("gpudiag_check_ok", "1 when every rank of the job passed", {}, doc.value("ok", false) ? 1 : 0);
  if (number(doc, "world_size", v)) p.gauge("gpudiag_check_ranks", "ranks in the job", {}, v);
  if (number(doc, "ranks_ok", v)) p.gauge("gpudiag_check_ranks_ok", "ranks that passed", {}, v);
}

void bench_metrics(PromText& p, const json& doc) {
  const std::string op = text(doc, "collective");
  double v = 0;
  for (const auto& row : doc.value("results", json::array())) {
    if (!row.is_object()) continue;
    for (const char* place : {"out_of_place", "in_place"}) {
      auto it = row.find(place);
      if (it == row.end() || !it->is_object()) continue;
      const PromLabels l{{"op", op}, {"bytes", text(row, "size")}, {"type", text(row, "type")},
                         {"redop", text(row, "redop")}, {"placement", place}};
      if (number(*it, "busbw_gbps", v))
        p.gauge("gpudiag_bench_busbw_gbps", "bus bandwidth GB/s per size, as nccl-tests' busbw", l, v);
      if (number(*it, "time_us", v)) p.gauge("gpudiag_bench_time_us", "time per call, microseconds", l, v);
      if (number(*it, "wrong", v))
        p.gauge("gpudiag_bench_wrong", "values that arrived wrong (nccl-tests' #wrong)", l, v);
    }
  }
  if (number(doc, "average_bus_bandwidth_gbps", v))
    p.gauge("gpudiag_bench_avg_busbw_gbps", "the average bus bandwidth line's figure", {{"op", op}}, v);
}

void links_metrics(PromText& p, const json& doc) {
  double v = 0;
  std::vector<std::string> host_of;
  for (const auto& r : doc.value("ranks", json::array()))
    if (r.is_object()) {
      const int rank = r.value("rank", -1);
      if (rank >= 0 && rank < (1 << 20)) {
        if (static_cast<int>(host_of.size()) <= rank) host_of.resize(rank + 1);
        host_of[rank] = text(r, "host");
      }
    }
  auto host = [&](int r) { return r >= 0 && r < static_cast<int>(host_of.size()) ? host_of[r] : ""; };
  for (const auto& l : doc.value("links", json::array())) {
    if (!l.is_object()) continue;
    const int a = l.value("a", -1), b = l.value("b", -1);
    const PromLabels lab{{"rank", std::to_string(a)}, {"host", host(a)}, {"peer_rank", std::to_string(b)},
                         {"peer", host(b)}};
    if (number(l, "gbps", v)) p.gauge("gpudiag_link_gbps", "GB/s each way between two ranks", lab, v);
    p.gauge("gpudiag_link_slow", "1 when the link is below the slow fraction of its class", lab,
            l.value("slow", false) ? 1 : 0);
  }
  if (number(doc, "slow_links", v)) p.gauge("gpudiag_links_slow", "slow links found", {}, v);
}

}  // namespace

std::string prometheus_from_report(const std::string& schema, const json& doc,
                                   const std::string& nccl) {
  PromText p;
  const std::string report = schema.rfind("gpudiag-check/", 0) == 0   ? "check"
                             : schema.rfind("gpudiag-links/", 0) == 0 ? "links"
                             : schema.rfind("gpudiag-info/", 0) == 0  ? "info"
                                                                      : "bench";
  p.gauge("gpudiag_info", "gpudiag's version and the NCCL it loaded", prom_info_labels(report, nccl),
          1);
  if (schema.rfind("gpudiag-check/", 0) == 0) check_metrics(p, doc);
  if (schema.rfind("gpudiag-bench/", 0) == 0) bench_metrics(p, doc);
  if (schema.rfind("gpudiag-links/", 0) == 0) links_metrics(p, doc);
  if (schema.rfind("gpudiag-info/", 0) == 0) info_metrics(p, doc);
  return p.text();
}

int write_report_prometheus(const std::string& path, const std::string& schema, const json& doc,
                            const std::string& nccl) {
  if (path.empty()) return 0;
  return write_prometheus_file(path, prometheus_from_report(schema, doc, nccl));
}

}  // namespace gpudiag
