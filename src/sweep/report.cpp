// The sweep's outputs (report.h). Every host name shown or written is the
// judge's (a peer's record, already escaped when decoded); a node with no
// test says so in words rather than with a zero that reads as a measurement.
#include "sweep/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "report/hostlist.h"
#include "report/prometheus.h"
#include "util/text.h"

namespace gpudiag::sweep {

namespace {

std::string host_of(const SweepOutcome& o, int node) {
  return node >= 0 && node < static_cast<int>(o.hosts.size()) ? o.hosts[node] : "node " + std::to_string(node);
}

int ranks_of(const SweepOutcome& o, int node) {
  return node >= 0 && node < static_cast<int>(o.ranks_per_node.size()) ? o.ranks_per_node[node] : 0;
}

std::string gbps(double v) { return fmt::format("{:.2f} GB/s", v); }

std::string test_name(const NodeTest& t) {
  return fmt::format("{} (round {})", t.stage, t.round);
}

/// Host names in the order people read them: "node2" before "node10" (runs
/// of digits compare as numbers).
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string_view x(a.data() + i, ie - i), y(b.data() + j, je - j);
      while (x.size() > 1 && x.front() == '0') x.remove_prefix(1);
      while (y.size() > 1 && y.front() == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

/// The verdicts in host order: the table, the JSON and the host files alike.
std::vector<NodeVerdict> by_host(const SweepOutcome& o) {
  std::vector<NodeVerdict> v = o.verdicts;
  std::stable_sort(v.begin(), v.end(), [&](const NodeVerdict& x, const NodeVerdict& y) {
    return natural_less(host_of(o, x.node), host_of(o, y.node));
  });
  return v;
}

/// Why an OK node's figure is below the threshold it shows (or failed), ""
/// when it is not: the test speaks against its partner, found bad; or it is
/// one slow test, and a node is slow only when its tests are slow at their
/// median (a busy moment is not a slow node), or when a deciding test is.
std::string below_note(const SweepOutcome& o, const NodeVerdict& v) {
  if (v.state != NodeState::ok || !v.evidence || v.threshold_gbps <= 0) return "";
  const NodeTest& t = *v.evidence;
  if (!t.failed && t.gbps >= v.threshold_gbps) return "";
  const std::string what = t.failed ? "failed" : "below the threshold";
  if (t.partner >= 0)
    for (const auto& p : o.verdicts)
      if (p.node == t.partner && p.state != NodeState::ok)
        return what + " with " + host_of(o, t.partner) + ", found " + state_name(p.state) +
               ": the test speaks against it, not this node";
  if (t.failed) return "failed once; every other test of this node passed";
  return "below the threshold in this test only: a node is slow when its tests are at their "
         "median (a busy moment is not a slow node)";
}

}  // namespace

std::string sweep_text(const SweepOutcome& o) {
  std::string out;
  int ranks = 0;
  for (int r : o.ranks_per_node) ranks += r;
  out += fmt::format("gpudiag sweep: {} node(s), {} rank(s), {}, {} MiB per pair exchange, {} round(s) in {:.1f} s\n",
                     o.hosts.size(), ranks, o.backend.empty() ? "?" : o.backend,
                     o.bytes >> 20, o.rounds.size(), o.seconds);
  std::size_t width = 8;  // "(within)"
  for (const auto& h : o.hosts) width = std::max(width, h.size());
  out += fmt::format("{:<{}}  {:<7}  {:<26}  {:>12}  {:>12}  {:<{}}  {}\n", "node", width, "state",
                     "test", "measured", "threshold", "partner", width, "where");
  for (const auto& v : by_host(o)) {
    const std::string host = host_of(o, v.node);
    if (!v.evidence) {
      out += fmt::format("{:<{}}  {:<7}  {}\n", host, width, state_name(v.state),
                         v.reason.empty() ? "no test ran" : v.reason);
      continue;
    }
    const NodeTest& t = *v.evidence;
    const std::string measured = t.failed ? "failed" : gbps(t.gbps);
    const std::string partner = t.partner < 0 ? "(within)" : host_of(o, t.partner);
    out += fmt::format("{:<{}}  {:<7}  {:<26}  {:>12}  {:>12}  {:<{}}  {}\n", host, width,
                       state_name(v.state), test_name(t), measured,
                       v.threshold_gbps > 0 ? gbps(v.threshold_gbps) : "-", partner, width, t.where);
    if (t.failed && !t.why.empty()) out += "    " + clean_text(t.why) + "\n";
    if (!v.reason.empty()) out += "    " + v.reason + "\n";
    if (const std::string note = below_note(o, v); !note.empty()) out += "    OK: " + note + "\n";
  }
  if (!o.compute_line.empty()) out += clean_text(o.compute_line) + "\n";
  for (const auto& w : o.warnings) out += "warning: " + clean_text(w) + "\n";
  if (o.rounds.empty() && !o.verdicts.empty()) {
    // Said, not left to the table's "no test ran": a pool that is one node
    // (a one-node allocation) is judged on its own tests alone.
    std::string why = o.hosts.size() < 2 ? "one node has no partner node to pair with" : "no round was run";
    if (o.hosts.size() < 2 && o.backend.rfind("host", 0) == 0)
      why += ", and the host backend pairs no ranks within a node";
    out += "no pair test ran: " + why + "\n";
  }
  const auto bad = excluded_hosts(o);
  if (bad.empty())
    out += fmt::format("no node to exclude: every one of the {} node(s) passed every test it took\n",
                       o.verdicts.size());
  else
    out += fmt::format("exclude {} of {} node(s): {}\n", bad.size(), o.verdicts.size(),
                       slurm_hostlist(bad));
  return out;
}

nlohmann::json sweep_json(const SweepOutcome& o) {
  using nlohmann::json;
  json nodes = json::array();
  for (const auto& v : by_host(o)) {
    json n{{"host", host_of(o, v.node)}, {"state", state_name(v.state)},
           {"ranks", ranks_of(o, v.node)}, {"reason", v.reason},
           {"confirmations", v.confirmations}};
    if (v.evidence) {
      const NodeTest& t = *v.evidence;
      n["test"] = {{"stage", t.stage},
                   {"round", t.round},
                   {"partner", t.partner < 0 ? json(nullptr) : json(host_of(o, t.partner))},
                   {"failed", t.failed},
                   {"measured_gbps", t.failed ? json(nullptr) : json(t.gbps)},
                   {"threshold_gbps", v.threshold_gbps},
                   {"where", t.where},
                   {"why", t.why},
                   {"ok_below_threshold", below_note(o, v)}};
    } else {
      n["test"] = nullptr;
    }
    nodes.push_back(std::move(n));
  }
  json rounds = json::array();
  for (const auto& r : o.rounds)
    rounds.push_back({{"round", r.index}, {"stage", r.stage}, {"pairs", r.pairs}, {"seconds", r.seconds}});
  json pairs = json::array();
  for (std::size_t i = 0; i < o.tests.size() && i < o.test_nodes.size(); ++i) {
    const auto& t = o.tests[i];
    const auto [a, b] = o.test_nodes[i];
    pairs.push_back({{"round", t.round}, {"stage", t.stage}, {"host", host_of(o, a)},
                     {"peer", a == b ? json(nullptr) : json(host_of(o, b))}, {"failed", t.failed},
                     {"gbps", t.failed ? json(nullptr) : json(t.gbps)}, {"where", t.where}});
  }
  const auto bad = excluded_hosts(o);
  return {{"backend", o.backend},     {"bytes", o.bytes},        {"seconds", o.seconds},
          {"gpu", o.gpu_name},        {"nccl", o.nccl_version},  {"nodes", nodes},
          {"rounds", rounds},         {"tests", pairs},          {"exclude", bad},
          {"exclude_hostlist", slurm_hostlist(bad)},             {"warnings", o.warnings},
          {"fingerprint", o.fingerprint},
          {"compute", o.compute_line.empty() ? json(nullptr)
                                             : json{{"line", o.compute_line},
                                                    {"rates_judged", o.compute_rates_judged},
                                                    {"slow", o.compute_slow}}}};
}

std::string sweep_prometheus(const SweepOutcome& o) {
  PromText p;
  p.gauge("gpudiag_info", "gpudiag's version and the NCCL it loaded", prom_info_labels("sweep", o.backend == "nccl" ? o.nccl_version : ""), 1);
  for (const auto& v : by_host(o)) {
    const std::string host = host_of(o, v.node);
    p.gauge("gpudiag_sweep_node_ok", "1 when the sweep found the node OK, 0 when it is to be excluded",
            {{"host", host}}, v.state == NodeState::ok);
    p.gauge("gpudiag_sweep_node_state", "the node's verdict (1 for its state)",
            {{"host", host}, {"state", state_name(v.state)}}, 1);
  }
  for (std::size_t i = 0; i < o.tests.size() && i < o.test_nodes.size(); ++i) {
    const auto& t = o.tests[i];
    if (t.failed) continue;
    const auto [a, b] = o.test_nodes[i];
    p.gauge("gpudiag_sweep_pair_bandwidth_gbps",
            "GB/s each way of the weakest rank pair of a test (peer = host within a node)",
            {{"host", host_of(o, a)}, {"peer", host_of(o, b)}, {"round", std::to_string(t.round)}},
            t.gbps);
  }
  for (std::size_t i = 0; i < o.tests.size() && i < o.test_nodes.size(); ++i) {
    const auto& t = o.tests[i];
    const auto [a, b] = o.test_nodes[i];
    p.gauge("gpudiag_sweep_pair_failed", "1 when a test's exchange failed",
            {{"host", host_of(o, a)}, {"peer", host_of(o, b)}, {"round", std::to_string(t.round)}},
            t.failed);
  }
  p.gauge("gpudiag_sweep_nodes", "nodes the sweep judged", {}, static_cast<double>(o.verdicts.size()));
  p.gauge("gpudiag_sweep_nodes_excluded", "nodes the sweep says to exclude", {},
          static_cast<double>(excluded_hosts(o).size()));
  p.gauge("gpudiag_sweep_rounds", "rounds the sweep ran", {}, static_cast<double>(o.rounds.size()));
  p.gauge("gpudiag_sweep_duration_seconds", "the sweep's wall time", {}, o.seconds);
  return p.text();
}

std::string exclude_file_text(const SweepOutcome& o) {
  return slurm_hostlist(excluded_hosts(o)) + "\n";
}

std::string good_hostfile_text(const SweepOutcome& o, bool mpi) {
  std::string out;
  for (const auto& v : by_host(o)) {
    if (v.state != NodeState::ok) continue;
    out += host_of(o, v.node);
    if (mpi) out += " slots=" + std::to_string(ranks_of(o, v.node));
    out += "\n";
  }
  return out;
}

}  // namespace gpudiag::sweep
