// See tally.h. One pass over the records, oldest first: per host and per GPU
// the set of jobs that judged it and the set that blamed it, and per GPU the
// host it was last seen under (a different one is a move).
#include "history/tally.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace gpudiag::history {

namespace {

/// The job a record belongs to; a record of no named job is its own.
std::string job_key(const Record& r, std::size_t index) {
  if (r.job_id.empty() || r.job_id == "gpudiag-by-hand") return "#" + std::to_string(index);
  return r.job_id;
}

struct HostAcc {
  std::set<std::string> jobs, faulty;
  std::string last_time, last_reason;
};
struct GpuAcc {
  std::set<std::string> jobs, faulty;
  std::vector<std::string> hosts;
  std::string last_host;
};

}  // namespace

Tally tally(const std::vector<Record>& records, const std::string& since) {
  std::map<std::string, HostAcc> hosts;
  std::map<std::string, GpuAcc> gpus;
  Tally t;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    if (!since.empty() && r.time < since) continue;
    ++t.records;
    const std::string job = job_key(r, i);
    auto& h = hosts[r.host];
    h.jobs.insert(job);
    if (r.verdict == Verdict::fault) {
      h.faulty.insert(job);
      h.last_time = r.time;
      h.last_reason = r.reason;
    }
    for (const auto& g : r.gpus) {
      if (g.uuid.empty()) continue;
      auto& acc = gpus[g.uuid];
      acc.jobs.insert(job);
      if (g.at_fault) acc.faulty.insert(job);
      if (std::find(acc.hosts.begin(), acc.hosts.end(), r.host) == acc.hosts.end())
        acc.hosts.push_back(r.host);
      if (!acc.last_host.empty() && acc.last_host != r.host)
        t.moves.push_back({g.uuid, acc.last_host, r.host, r.time});
      acc.last_host = r.host;
    }
  }
  for (auto& [name, h] : hosts)
    t.hosts.push_back({name, static_cast<int>(h.faulty.size()), static_cast<int>(h.jobs.size()),
                       h.last_time, h.last_reason});
  for (auto& [uuid, g] : gpus)
    t.gpus.push_back(
        {uuid, static_cast<int>(g.faulty.size()), static_cast<int>(g.jobs.size()), g.hosts});
  std::stable_sort(t.hosts.begin(), t.hosts.end(),
                   [](const HostTally& a, const HostTally& b) { return a.faults > b.faults; });
  std::stable_sort(t.gpus.begin(), t.gpus.end(),
                   [](const GpuTally& a, const GpuTally& b) { return a.faults > b.faults; });
  return t;
}

std::vector<std::pair<std::string, std::string>> hosts_at_fault(const Tally& t, int n,
                                                                const std::string& since) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& h : t.hosts) {
    if (n <= 0 || h.faults < n) continue;
    out.emplace_back(h.host,
                     fmt::format("at fault in {} job{} of the history{} (last {}: {})", h.faults,
                                 h.faults == 1 ? "" : "s", since.empty() ? "" : " since " + since,
                                 h.last_fault_time,
                                 h.last_reason.empty() ? "no reason recorded" : h.last_reason));
  }
  return out;
}

std::string tally_text(const Tally& t, const Folder& f, const std::string& since) {
  std::string out = fmt::format("{} record{}{}", t.records, t.records == 1 ? "" : "s",
                                since.empty() ? "" : " since " + since);
  if (f.skipped) out += fmt::format(", {} file{} skipped", f.skipped, f.skipped == 1 ? "" : "s");
  if (f.not_read) out += fmt::format(", {} older not read", f.not_read);
  out += "\n";
  for (const auto& why : f.skipped_why) out += "  skipped " + why + "\n";
  if (t.hosts.empty()) return out + "no host judged\n";
  out += fmt::format("\n{:<24} {:>6} {:>6}  {}\n", "HOST", "FAULTS", "JOBS", "LAST FAULT");
  for (const auto& h : t.hosts)
    out += fmt::format("{:<24} {:>6} {:>6}  {}\n", h.host, h.faults, h.jobs,
                       h.faults ? h.last_fault_time + " " + h.last_reason : "-");
  if (!t.gpus.empty()) {
    out += fmt::format("\n{:<44} {:>6} {:>6}  {}\n", "GPU", "FAULTS", "JOBS", "HOSTS");
    for (const auto& g : t.gpus) {
      std::string hosts;
      for (const auto& h : g.hosts) hosts += (hosts.empty() ? "" : ",") + h;
      out += fmt::format("{:<44} {:>6} {:>6}  {}\n", g.uuid, g.faults, g.jobs, hosts);
    }
  }
  for (const auto& m : t.moves)
    out += fmt::format(
        "moved: {} was on {}, then on {} at {} (its faults follow the GPU, not "
        "the host name)\n",
        m.uuid, m.from, m.to, m.time);
  return out;
}

nlohmann::json tally_json(const Tally& t, const Folder& f, const std::string& since) {
  nlohmann::json j;
  j["since"] = since.empty() ? nlohmann::json(nullptr) : nlohmann::json(since);
  j["records"] = t.records;
  j["skipped"] = f.skipped;
  j["skipped_why"] = f.skipped_why;
  j["not_read"] = f.not_read;
  j["hosts"] = nlohmann::json::array();
  for (const auto& h : t.hosts)
    j["hosts"].push_back(
        {{"host", h.host},
         {"faults", h.faults},
         {"jobs", h.jobs},
         {"last_fault_time", h.faults ? nlohmann::json(h.last_fault_time) : nullptr},
         {"last_reason", h.faults ? nlohmann::json(h.last_reason) : nullptr}});
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : t.gpus)
    j["gpus"].push_back(
        {{"uuid", g.uuid}, {"faults", g.faults}, {"jobs", g.jobs}, {"hosts", g.hosts}});
  j["moves"] = nlohmann::json::array();
  for (const auto& m : t.moves)
    j["moves"].push_back({{"uuid", m.uuid}, {"from", m.from}, {"to", m.to}, {"time", m.time}});
  return j;
}

}  // namespace gpudiag::history
