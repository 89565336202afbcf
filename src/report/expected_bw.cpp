// The expected-bandwidth table and its verdicts (expected_bw.h). The files are
// parsed strictly (every field present and of its type, figures positive),
// because a table that silently lost a figure would silently stop judging.
// Names are matched as substrings, case-insensitively: CUDA's names vary in
// spacing and case between SKUs and drivers ("A100-SXM4-80GB", "A100-SXM-80GB").
#include "report/expected_bw.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "report/expected_bw_data.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

[[noreturn]] void bad_table(const std::string& file, const std::string& what) {
  throw Error(ExitCode::internal, "data/expected-bw/" + file + ": " + what,
              "fix the file (data/expected-bw/README.md) and rebuild");
}

const json& field(const std::string& file, const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) bad_table(file, std::string("no field \"") + key + "\"");
  return j.at(key);
}

std::string text(const std::string& file, const json& j, const char* key) {
  const auto& v = field(file, j, key);
  if (!v.is_string() || v.get_ref<const std::string&>().empty())
    bad_table(file, std::string("\"") + key + "\" is not a non-empty string");
  return v.get<std::string>();
}

double figure(const std::string& file, const json& j, const char* key) {
  const auto& v = field(file, j, key);
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    bad_table(file, std::string("\"") + key + "\" is not a positive number");
  return v.get<double>();
}

std::vector<std::string> texts(const std::string& file, const json& j, const char* key) {
  const auto& v = field(file, j, key);
  if (!v.is_array()) bad_table(file, std::string("\"") + key + "\" is not a list");
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty())
      bad_table(file, std::string("\"") + key + "\" holds something other than names");
    out.push_back(lower(s.get<std::string>()));
  }
  return out;
}

/// An expected figure: "360", "22.5".
std::string gbps(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f" : "%.1f", v);
  return buf;
}

/// A measured one: "312.4", "4.82".
std::string measured_gbps(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

/// The table's figure for `m`, with the words that say where it comes from;
/// nullopt (and `why`) when the table has none.
struct Figure {
  double gbps = 0;
  std::string basis, source;
  std::uint64_t judged_from = 0;  ///< the smallest size it holds at
};

std::optional<Figure> table_figure(const GpuFamily& f, const BwMeasurement& m, std::string& why) {
  const bool pair = m.kind == BwMeasurement::Kind::link_pair;
  if (!m.across_nodes && f.intra_needs_switch && m.nvlink_known && !m.nvlink_switched) {
    // No NVSwitch between the node's GPUs: the figure is the topology's.
    const std::string topo = std::to_string(m.nvlink_links_per_pair) +
                             " NVLinks a pair, no NVSwitch (NVML)";
    // The board's row: the fewest links a pair at or above what NVML shows
    // (a link down is judged by the board's figure, and shows in it).
    auto row = std::find_if(f.intra_mesh.begin(), f.intra_mesh.end(), [&](auto& r) {
      return r.links_per_pair >= m.nvlink_links_per_pair;
    });
    const double g = row == f.intra_mesh.end() ? 0 : pair ? row->link_pair : row->allreduce_busbw;
    if (g <= 0) {
      why = "no figure for " + f.family + " on this topology (" + topo + ") in data/expected-bw/" +
            f.file;
      return std::nullopt;
    }
    return Figure{g, f.family + ", " + row->fabric + " (" + topo + ")" +
                         (pair ? ", a pair on one node" : ", one node"),
                  row->source, f.judged_from_bytes};
  }
  if (!m.across_nodes)
    return Figure{pair ? f.intra_link_pair : f.intra_allreduce_busbw,
                  f.family + ", " + f.intra_fabric + (pair ? ", a pair on one node" : ", one node"),
                  f.intra_source, f.judged_from_bytes};
  if (m.one_nvlink_domain) {
    if (!f.has_domain) {
      why = "no figure for " + f.family + " across nodes of one NVLink domain in " +
            "data/expected-bw/" + f.file;
      return std::nullopt;
    }
    return Figure{pair ? f.domain_link_pair : f.domain_allreduce_busbw,
                  f.family + ", " + f.domain_fabric +
                      (pair ? ", a pair on two nodes of one NVLink domain"
                            : ", several nodes of one NVLink domain"),
                  f.domain_source, f.domain_judged_from_bytes};
  }
  if (m.rdma_rate_gbps <= 0) {
    why =
        "no active InfiniBand/RoCE port found on rank 0's host; across nodes the figure "
        "depends on the NICs";
    return std::nullopt;
  }
  auto nic = std::find_if(f.inter.begin(), f.inter.end(),
                          [&](const NicExpectation& n) { return n.rate_gbps == m.rdma_rate_gbps; });
  if (nic == f.inter.end()) {
    why = "no figure for " + f.family + " with " + std::to_string(m.rdma_rate_gbps) +
          " Gb/s NICs in data/expected-bw/" + f.file;
    return std::nullopt;
  }
  const std::string rate = std::to_string(nic->rate_gbps) + " Gb/s";
  if (pair)
    return Figure{nic->link_pair, f.family + ", a pair across nodes, one " + rate + " NIC",
                  nic->source, f.judged_from_bytes};
  int ports = std::max(1, m.rdma_ports);
  std::string used = std::to_string(ports) + "x " + rate + " NICs a node";
  if (m.gpus_per_node > 0 && m.gpus_per_node < ports) {
    used = std::to_string(m.gpus_per_node) + " of " + std::to_string(ports) + "x " + rate +
           " NICs a node (" + std::to_string(m.gpus_per_node) + " GPU" +
           (m.gpus_per_node == 1 ? "" : "s") + " a node in the job)";
    ports = m.gpus_per_node;
  }
  if (m.rdma_ports_down > 0)  // counted at the rate of the others: a finding, not a lower bar
    used += "; " + std::to_string(m.rdma_ports_down) + " of them DOWN on rank 0's host";
  const std::uint64_t from = std::max(f.judged_from_bytes, nic->judged_from_bytes);
  const double nics = nic->allreduce_busbw_per_nic * ports;
  if (nics >= f.intra_allreduce_busbw)
    return Figure{f.intra_allreduce_busbw,
                  f.family + ", several nodes, " + used + " (the node's " + f.intra_fabric +
                      " figure is the lower)",
                  f.intra_source + "; " + nic->source, from};
  return Figure{nics, f.family + ", several nodes, " + used, nic->source, from};
}

std::string title(const BwMeasurement& m) {
  return m.kind == BwMeasurement::Kind::allreduce ? "Expected bus bandwidth"
                                                  : "Expected link bandwidth";
}

}  // namespace

GpuFamily parse_gpu_family(const std::string& file, std::string_view json_text) {
  json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) bad_table(file, "not a JSON object");
  GpuFamily f;
  f.file = file;
  f.family = text(file, j, "family");
  f.match = texts(file, j, "match");
  f.exclude = texts(file, j, "exclude");
  if (f.match.empty()) bad_table(file, "\"match\" is empty");
  const auto& from = field(file, j, "judged_from_bytes");
  if (!from.is_number_unsigned()) bad_table(file, "\"judged_from_bytes\" is not a byte count");
  f.judged_from_bytes = from.get<std::uint64_t>();
  const auto& intra = field(file, j, "intra_node");
  f.intra_fabric = text(file, intra, "fabric");
  f.intra_allreduce_busbw = figure(file, intra, "allreduce_busbw");
  f.intra_link_pair = figure(file, intra, "link_pair");
  f.intra_source = text(file, intra, "source");
  const auto& inter = field(file, j, "inter_node");
  if (!inter.is_array()) bad_table(file, "\"inter_node\" is not a list");
  for (const auto& n : inter) {
    NicExpectation e;
    const auto& rate = field(file, n, "rate_gbps");
    if (!rate.is_number_unsigned() || rate.get<int>() <= 0)
      bad_table(file, "\"rate_gbps\" is not a rate");
    e.rate_gbps = rate.get<int>();
    e.allreduce_busbw_per_nic = figure(file, n, "allreduce_busbw_per_nic");
    e.link_pair = figure(file, n, "link_pair");
    e.source = text(file, n, "source");
    if (auto from = n.find("judged_from_bytes"); from != n.end()) {
      if (!from->is_number_unsigned() || from->get<std::uint64_t>() == 0)
        bad_table(file, "\"inter_node.judged_from_bytes\" is not a byte count");
      e.judged_from_bytes = from->get<std::uint64_t>();
    }
    f.inter.push_back(std::move(e));
  }
  std::sort(f.inter.begin(), f.inter.end(),
            [](auto& a, auto& b) { return a.rate_gbps < b.rate_gbps; });
  if (auto mesh = j.find("intra_node_mesh"); mesh != j.end()) {
    if (!mesh->is_array()) bad_table(file, "\"intra_node_mesh\" is not a list");
    f.intra_needs_switch = true;
    for (const auto& r : *mesh) {
      MeshExpectation e;
      const auto& n = field(file, r, "links_per_pair");
      if (!n.is_number_unsigned() || n.get<int>() <= 0)
        bad_table(file, "\"links_per_pair\" is not a link count");
      e.links_per_pair = n.get<int>();
      e.fabric = text(file, r, "fabric");
      if (r.contains("allreduce_busbw")) e.allreduce_busbw = figure(file, r, "allreduce_busbw");
      e.link_pair = figure(file, r, "link_pair");
      e.source = text(file, r, "source");
      f.intra_mesh.push_back(std::move(e));
    }
    std::sort(f.intra_mesh.begin(), f.intra_mesh.end(),
              [](auto& a, auto& b) { return a.links_per_pair < b.links_per_pair; });
  }
  if (auto d = j.find("nvlink_domain"); d != j.end()) {
    if (!d->is_object()) bad_table(file, "\"nvlink_domain\" is not an object");
    f.has_domain = true;
    f.domain_fabric = text(file, *d, "fabric");
    f.domain_allreduce_busbw = figure(file, *d, "allreduce_busbw");
    f.domain_link_pair = figure(file, *d, "link_pair");
    const auto& dfrom = field(file, *d, "judged_from_bytes");
    if (!dfrom.is_number_unsigned()) bad_table(file, "\"nvlink_domain.judged_from_bytes\" is not a byte count");
    f.domain_judged_from_bytes = dfrom.get<std::uint64_t>();
    f.domain_source = text(file, *d, "source");
  }
  return f;
}

const std::vector<GpuFamily>& expected_bw_table() {
  static const std::vector<GpuFamily> table = [] {
    std::vector<GpuFamily> t;
    for (std::size_t i = 0; i < kExpectedBwFiles_count; ++i)
      if (kExpectedBwFiles[i].name)
        t.push_back(parse_gpu_family(kExpectedBwFiles[i].name, kExpectedBwFiles[i].text));
    return t;
  }();
  return table;
}

const GpuFamily* find_family(const std::vector<GpuFamily>& table, const std::string& gpu_name) {
  const std::string name = lower(gpu_name);
  auto has = [&](const std::vector<std::string>& subs) {
    return std::any_of(subs.begin(), subs.end(),
                       [&](const std::string& s) { return name.find(s) != std::string::npos; });
  };
  for (const auto& f : table)
    if (has(f.match) && !has(f.exclude)) return &f;
  return nullptr;
}

BwVerdict judge_bandwidth(const BwMeasurement& m, const std::vector<GpuFamily>& table) {
  BwVerdict v;
  v.measured_gbps = m.gbps;
  const std::string measured = measured_gbps(m.gbps) + (m.what.empty() ? "" : " (" + m.what + ")");
  const bool gpu = m.backend == "nccl" && !m.gpu_name.empty();
  if (!gpu) {
    // Host memory and TCP or MPI: no GPU fabric to hold it to, even with
    // --expect-busbw (a host run passing would say nothing of the GPUs).
    v.verdict = "not applicable";
    v.source = "backend " + (m.backend.empty() ? std::string("?") : m.backend) +
               ": host memory, not the GPUs' fabric";
    v.text = title(m) + " : does not apply (" + v.source + "); measured " + measured;
    return v;
  }
  if (!(m.gbps > 0)) {  // one rank, or nothing timed: no bandwidth crossed a link
    v.verdict = "not applicable";
    v.source = "no bandwidth measured (one rank moves no data between ranks)";
    v.text = title(m) + " : does not apply (" + v.source + ")";
    return v;
  }
  if (!m.shared_gpu.empty() && !m.expect_override) {
    v.verdict = "not applicable";
    v.source = m.shared_gpu + ": the table's figures are for one GPU per rank";
    v.text = title(m) + " : does not apply (" + v.source + "); measured " + measured;
    return v;
  }
  const GpuFamily* family = find_family(table, m.gpu_name);
  std::optional<Figure> fig;
  std::string why;
  if (m.expect_override) {
    fig = Figure{*m.expect_override, "--expect-busbw", "given on the command line"};
  } else if (!family) {
    why = "no expectation for this hardware (" + m.gpu_name + ")";
  } else {
    v.file = "data/expected-bw/" + family->file;
    fig = table_figure(*family, m, why);
    if (fig && m.bytes < static_cast<double>(fig->judged_from)) {
      v.verdict = "no verdict";
      v.expected_gbps = fig->gbps;
      v.basis = fig->basis;
      v.source = fig->source;
      v.text = title(m) + " : " + gbps(fig->gbps) + " GB/s (" + fig->basis + ") from " +
               human_bytes(fig->judged_from) + "; measured " + measured + " at " +
               human_bytes(static_cast<std::uint64_t>(m.bytes)) + ": too small a size to judge";
      return v;
    }
  }
  if (!fig) {
    v.verdict = "none";
    v.source = why;
    v.text = title(m) + " : " + why + "; pass --expect-busbw GB/s; measured " + measured;
    return v;
  }
  v.expected_gbps = fig->gbps;
  v.basis = fig->basis;
  v.source = fig->source;
  const double ratio = m.gbps / fig->gbps;
  v.percent = static_cast<int>(std::lround(ratio * 100));
  v.verdict = ratio < kFailFraction ? "FAIL" : ratio < kWarnFraction ? "WARN" : "PASS";
  v.text = title(m) + " : " + gbps(fig->gbps) + " GB/s (" + fig->basis +
           (v.file.empty() ? "" : "; source " + v.file) + ") measured " + measured + ": " +
           v.verdict + " (" + std::to_string(v.percent) + "%)";
  return v;
}

std::string verdict_line(const BwVerdict& v, std::string_view prefix) {
  return std::string(prefix) + v.text + "\n";
}

nlohmann::json verdict_json(const BwVerdict& v) {
  json j{{"verdict", v.verdict}, {"measured_gbps", v.measured_gbps},
         {"basis", v.basis},     {"source", v.source},
         {"file", v.file},       {"text", v.text}};
  j["expected_gbps"] = v.expected_gbps > 0 ? json(v.expected_gbps) : json(nullptr);
  j["percent"] = v.verdict == "PASS" || v.verdict == "WARN" || v.verdict == "FAIL" ? json(v.percent)
                                                                                   : json(nullptr);
  return j;
}

}  // namespace gpudiag
