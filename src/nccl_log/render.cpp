// Text and JSON renderings of a Report (render.h). The text caps long tables (64 processes,
// 8 peers per transport, 8 names per finding) and points to --json for the rest.
#include "nccl_log/render.h"

#include <algorithm>

#include "util/strings.h"

namespace gpudiag::nccl_log {

namespace {

constexpr std::size_t kMaxRows = 64;

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string ranks_text(const ProcessSummary& p) {
  auto rs = p.ranks();
  if (rs.empty()) return p.launcher_rank >= 0 ? "(" + std::to_string(p.launcher_rank) + ")" : "?";
  std::vector<std::string> parts;
  for (int r : rs) parts.push_back(std::to_string(r));
  return join(parts, ",");
}

std::string interface_text(const std::vector<Interface>& is) {
  if (is.empty()) return "-";
  const auto& i = is.front();
  std::string s = i.address.empty() ? i.name : i.name + " " + i.address;
  if (is.size() > 1) s += " (+" + std::to_string(is.size() - 1) + ")";
  return s;
}

std::string nics_text(const ProcessSummary& p) {
  std::vector<std::string> names;
  if (!p.ib_nics.empty()) {
    for (const auto& n : p.ib_nics) names.push_back(n.substr(0, n.find('/')));
  } else if (p.network == "Socket") {
    for (const auto& n : p.socket_nics) names.push_back(n.name);
  }
  if (names.size() > 4) {
    auto more = names.size() - 3;
    names.resize(3);
    names.push_back("+" + std::to_string(more));
  }
  return names.empty() ? "-" : join(names, ",");
}

std::string init_text(const ProcessSummary& p) {
  if (p.comms.empty()) return "not seen";
  std::size_t done = std::count_if(p.comms.begin(), p.comms.end(),
                                   [](const auto& kv) { return kv.second.complete; });
  if (done == p.comms.size()) return "complete";
  return std::to_string(done) + "/" + std::to_string(p.comms.size()) + " comms complete";
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line = "  ";
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string transports_text(const ProcessSummary& p) {
  std::vector<std::string> parts;
  for (const auto& [label, peers] : p.transports) {
    std::vector<std::string> ps;
    for (int r : peers) ps.push_back(std::to_string(r));
    if (ps.size() > 8) {
      auto more = ps.size() - 8;
      ps.resize(8);
      ps.push_back("+" + std::to_string(more));
    }
    parts.push_back(label + " -> " + join(ps, ","));
  }
  return join(parts, "; ");
}

nlohmann::ordered_json evidence_json(const Evidence& e) {
  return {{"file", e.file}, {"line", e.line}, {"text", e.text}};
}

nlohmann::ordered_json process_json(const ProcessSummary& p) {
  nlohmann::ordered_json j;
  j["key"] = p.key;
  j["host"] = p.host;
  j["pid"] = p.pid;
  j["ranks"] = p.ranks();
  j["rank"] = p.rank();
  j["world_size"] = p.world_size();
  j["launcher_rank"] = p.launcher_rank;
  j["files"] = p.files;
  j["nccl_version"] = p.nccl_version;
  auto ifaces = [](const std::vector<Interface>& is) {
    auto a = nlohmann::ordered_json::array();
    for (const auto& i : is) a.push_back({{"name", i.name}, {"address", i.address}});
    return a;
  };
  j["bootstrap"] = ifaces(p.bootstrap);
  j["socket_nics"] = ifaces(p.socket_nics);
  j["network"] = p.network;
  j["network_kind"] = p.network_kind();
  j["ib_nics"] = p.ib_nics;
  j["net_plugin"] = p.net_plugin;
  j["verbs_missing"] = p.verbs_missing;
  j["transports"] = nlohmann::ordered_json::object();
  for (const auto& [label, peers] : p.transports) j["transports"][label] = peers;
  j["comms"] = nlohmann::ordered_json::array();
  for (const auto& [id, c] : p.comms)
    j["comms"].push_back({{"id", id},
                          {"rank", c.rank},
                          {"nranks", c.nranks},
                          {"nnodes", c.nnodes},
                          {"cuda_dev", c.cuda_dev},
                          {"bus_id", c.bus_id},
                          {"complete", c.complete},
                          {"aborted", c.aborted}});
  j["init_complete"] = p.init_complete();
  j["env"] = p.env;
  j["warnings"] = nlohmann::ordered_json::array();
  for (const auto& w : p.warnings) {
    auto chain = nlohmann::ordered_json::array();
    for (const auto& s : w.chain)
      chain.push_back({{"where", s.where},
                       {"code", s.code},
                       {"result", result_name(s.code)},
                       {"thread", s.thread}});
    auto jw = evidence_json(w.where);
    jw["message"] = w.line.message;
    jw["timestamp"] = w.line.timestamp;
    jw["chain"] = chain;
    j["warnings"].push_back(jw);
  }
  j["lines"] = p.lines;
  j["last_line"] = evidence_json(p.last_line);
  return j;
}

}  // namespace

Report summarize(const std::vector<std::string>& paths, const InputLimits& limits) {
  Report r;
  r.job = read_job(paths, limits);
  r.findings = find_problems(r.job);
  return r;
}

std::string render_text(const Report& report) {
  const Job& job = report.job;
  auto hosts = job.hosts();
  std::string out = "NCCL logs: " + std::to_string(job.processes.size()) + " process" +
                    (job.processes.size() == 1 ? "" : "es") + " on " +
                    std::to_string(hosts.size()) + " host" + (hosts.size() == 1 ? "" : "s");
  if (!hosts.empty() && hosts.size() <= 4)
    out += " (" + join(std::vector<std::string>(hosts.begin(), hosts.end()), ", ") + ")";
  out += "; " + std::to_string(job.files.size()) + " file" + (job.files.size() == 1 ? "" : "s") +
         ", " + std::to_string(job.nccl_lines) + " NCCL lines, " + std::to_string(job.other_lines) +
         " other lines";
  if (job.torch_lines > 0)
    out += ", " + std::to_string(job.torch_lines) + " PyTorch watchdog lines";
  if (job.diag_lines > 0) out += ", " + std::to_string(job.diag_lines) + " NCCL DIAG lines";
  if (!job.skipped.empty())
    out += ", " + std::to_string(job.skipped.size()) + " file" +
           (job.skipped.size() == 1 ? "" : "s") + " skipped (not NCCL logs)";
  if (job.junk_lines > 0)
    out += ", " + std::to_string(job.junk_lines) + " skipped as junk (binary bytes, lines over " +
           human_bytes(kMaxLineBytes) + ")";
  out += "\n\n";

  std::vector<std::vector<std::string>> rows = {
      {"RANK", "PROCESS", "NCCL", "BOOTSTRAP", "NETWORK", "NICS", "INIT"}};
  for (std::size_t i = 0; i < job.processes.size() && i < kMaxRows; ++i) {
    const auto& p = job.processes[i];
    rows.push_back({ranks_text(p), p.key, or_dash(p.nccl_version), interface_text(p.bootstrap),
                    or_dash(p.network_kind()), nics_text(p), init_text(p)});
  }
  out += table(rows);
  if (job.processes.size() > kMaxRows)
    out += "  ... " + std::to_string(job.processes.size() - kMaxRows) + " more (see --json)\n";

  std::string transports;
  for (std::size_t i = 0; i < job.processes.size() && i < kMaxRows; ++i)
    if (auto t = transports_text(job.processes[i]); !t.empty())
      transports += "  " + job.processes[i].label() + ": " + t + "\n";
  if (!transports.empty()) out += "\nTransports to peers:\n" + transports;

  std::size_t problems =
      std::count_if(report.findings.begin(), report.findings.end(),
                    [](const Finding& f) { return f.severity == Severity::problem; });
  std::size_t notes = report.findings.size() - problems;
  if (report.findings.empty()) {
    out += "\nNo problems found.\n";
    return out;
  }
  out += "\n" + std::to_string(problems) + " problem" + (problems == 1 ? "" : "s") + ", " +
         std::to_string(notes) + " note" + (notes == 1 ? "" : "s") + ":\n";
  for (const auto& f : report.findings) {
    out += "\n" + std::string(f.severity == Severity::problem ? "PROBLEM" : "note") + " [" + f.id +
           "] " + f.title + "\n";
    auto list = [&](const char* head, const std::vector<std::string>& names) {
      if (names.empty()) return;
      std::vector<std::string> shown(names.begin(),
                                     names.begin() + std::min<std::size_t>(names.size(), 8));
      if (names.size() > 8) shown.push_back("and " + std::to_string(names.size() - 8) + " more");
      out += std::string("  ") + head + join(shown, ", ") + "\n";
    };
    if (f.blamed.empty() && f.waiting.empty() && f.unknown.empty()) {
      list("who:  ", f.who);
    } else {  // blame, the ones that only waited, and what cannot be told, apart
      list("blamed:  ", f.blamed);
      list("waiting: ", f.waiting);
      list("unknown: ", f.unknown);
    }
    for (const auto& e : f.evidence)
      out += "  log:  " + e.file + ":" + std::to_string(e.line) + ": " + e.text + "\n";
    out += "  try:  " + f.remedy + "\n";
  }
  return out;
}

nlohmann::ordered_json render_json(const Report& report) {
  const Job& job = report.job;
  nlohmann::ordered_json j;
  j["files"] = nlohmann::ordered_json::array();
  for (const auto& f : job.files)
    j["files"].push_back({{"path", f.path}, {"lines", f.lines}, {"nccl_lines", f.nccl_lines}});
  j["skipped_files"] = nlohmann::ordered_json::array();
  for (const auto& f : job.skipped)
    j["skipped_files"].push_back({{"path", f.path}, {"why", f.why}});
  j["hosts"] = job.hosts();
  j["multi_node"] = job.multi_node();
  j["nccl_lines"] = job.nccl_lines;
  j["other_lines"] = job.other_lines;
  j["torch_lines"] = job.torch_lines;
  j["diag_lines"] = job.diag_lines;
  j["junk_lines"] = job.junk_lines;
  j["processes"] = nlohmann::ordered_json::array();
  for (const auto& p : job.processes) j["processes"].push_back(process_json(p));
  j["findings"] = nlohmann::ordered_json::array();
  for (const auto& f : report.findings) {
    auto ev = nlohmann::ordered_json::array();
    for (const auto& e : f.evidence) ev.push_back(evidence_json(e));
    j["findings"].push_back({{"id", f.id},
                             {"severity", severity_name(f.severity)},
                             {"title", f.title},
                             {"who", f.who},
                             {"evidence", ev},
                             {"remedy", f.remedy},
                             {"blamed", f.blamed},
                             {"waiting", f.waiting},
                             {"unknown", f.unknown}});
  }
  j["problems"] = has_problem(report.findings);
  j["exit_code"] = report.exit_code();
  return j;
}

}  // namespace gpudiag::nccl_log
