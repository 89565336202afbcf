// See verdicts.h. Each builder says in the record's reason what the verdict
// said of the host, in the words the command printed.
#include "history/verdicts.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "checks/peer_book.h"
#include "report/rank_status.h"
#include "util/strings.h"

namespace gpudiag::history {

namespace {

namespace fs = std::filesystem;

Record stamped(const Stamp& s, const std::string& command, const std::string& host) {
  Record r;
  r.time = s.time;
  r.command = command;
  r.host = host;
  r.job_id = s.job_id;
  r.job_source = s.job_source;
  return r;
}

bool blames_rank(RankStatus::Kind k) {
  using K = RankStatus::Kind;
  return k == K::broken || k == K::dead || k == K::gone;
}

std::string rank_phrase(const RankStatus& s, const RankRecord& rec) {
  std::string what = "rank " + std::to_string(s.rank) + " " + status_name(s.kind);
  if (!s.failed_phase.empty()) what += " in " + s.failed_phase;
  if (!s.hardware.empty()) return what + ": " + s.hardware;
  if (!s.death.empty()) return what + ": " + s.death;
  if (!rec.reason.empty()) return what + ": " + rec.reason;
  return what;
}

}  // namespace

Stamp stamp_now(const std::string& job_id, const std::string& job_source) {
  if (job_id == "gpudiag-by-hand") return {"", "", utc_time(std::time(nullptr))};
  return {job_id, job_source, utc_time(std::time(nullptr))};
}

std::vector<Record> check_records(const CheckResult& result, const Stamp& stamp,
                                  const std::vector<std::string>& my_nics) {
  const auto records = dense_records(result.table);
  const auto statuses = rank_statuses(result);
  std::map<std::string, Record> by_host;  // in host order: one record each
  std::map<std::string, std::vector<std::string>> blamed, other;
  for (std::size_t r = 0; r < records.size() && r < statuses.size(); ++r) {
    if (!records[r] || records[r]->host.empty()) continue;  // never heard from: no host
    const auto& rec = *records[r];
    const auto& st = statuses[r];
    auto [it, fresh] = by_host.try_emplace(rec.host, stamped(stamp, "check", rec.host));
    if (fresh && rec.host == result.me.host) it->second.nics = my_nics;
    const bool fault = blames_rank(st.kind);
    if (!rec.gpu_uuid.empty() || !rec.gpu_bus_id.empty())
      it->second.gpus.push_back(
          {rec.gpu_uuid, "", rec.gpu_bus_id, fault && st.kind == RankStatus::Kind::broken});
    if (fault)
      blamed[rec.host].push_back(rank_phrase(st, rec));
    else if (!st.ok())
      other[rec.host].push_back(rank_phrase(st, rec));
  }
  std::vector<Record> out;
  for (auto& [host, r] : by_host) {
    if (auto b = blamed.find(host); b != blamed.end()) {
      r.verdict = Verdict::fault;
      r.reason = join(b->second, "; ");
    } else if (auto o = other.find(host); o != other.end()) {
      r.verdict = Verdict::other;
      r.reason = join(o->second, "; ");
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Record> sweep_records(
    const sweep::SweepOutcome& out, const Stamp& stamp,
    const std::vector<std::pair<std::string, std::string>>& left_out) {
  std::vector<Record> recs;
  for (const auto& v : out.verdicts) {
    if (v.node < 0 || v.node >= static_cast<int>(out.hosts.size())) continue;
    Record r = stamped(stamp, "sweep", out.hosts[v.node]);
    const bool untested = std::any_of(left_out.begin(), left_out.end(),
                                      [&](const auto& l) { return l.first == r.host; });
    if (untested) {
      r.verdict = Verdict::other;
      r.reason = "not tested: left out by --exclude-history";
    } else if (v.state != sweep::NodeState::ok) {
      r.verdict = Verdict::fault;
      r.reason = std::string(sweep::state_name(v.state));
      if (!v.reason.empty())
        r.reason += ": " + v.reason;
      else if (v.evidence)
        r.reason += fmt::format(": {} {} {:.2f} GB/s{}", v.evidence->stage, v.evidence->where,
                                v.evidence->gbps,
                                v.evidence->why.empty() ? "" : " (" + v.evidence->why + ")");
    }
    recs.push_back(std::move(r));
  }
  return recs;
}

Record launch_record(const std::vector<launch::AttemptEnd>& attempts, int exit_status,
                     const std::string& host, const Stamp& stamp) {
  Record r = stamped(stamp, "launch", host);
  int faulty = 0;
  std::string first;
  for (const auto& a : attempts)
    if (!a.node_fault.empty() && faulty++ == 0) first = a.node_fault;
  if (faulty > 0) {
    r.verdict = Verdict::fault;
    r.reason = first + (attempts.size() > 1 ? fmt::format(" (at fault in {} of {} attempts)",
                                                          faulty, attempts.size())
                                            : "");
  } else if (exit_status != 0) {
    r.verdict = Verdict::other;
    r.reason =
        "the job ended with status " + std::to_string(exit_status) + ", not this node's fault";
  }
  return r;
}

std::vector<GpuId> local_gpus(const std::string& proc_root) {
  std::vector<GpuId> out;
  std::error_code ec;
  fs::directory_iterator it(fs::path(proc_root) / "driver" / "nvidia" / "gpus", ec);
  if (ec) return out;
  for (const auto& e : it) {
    if (out.size() >= kMaxGpus) break;
    std::ifstream in(e.path() / "information");
    GpuId g;
    g.bus_id = e.path().filename().string();
    std::string line;
    for (int n = 0; n < 64 && std::getline(in, line); ++n) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key(trim(line.substr(0, colon)));
      const std::string value(trim(line.substr(colon + 1)));
      if (key == "GPU UUID") g.uuid = value;
      if (key == "Bus Location") g.bus_id = value;
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const GpuId& a, const GpuId& b) { return a.bus_id < b.bus_id; });
  return out;
}

std::vector<std::string> local_nics(const std::string& sys_root) {
  std::vector<std::string> out;
  for (const char* cls : {"net", "infiniband"}) {
    std::error_code ec;
    fs::directory_iterator it(fs::path(sys_root) / "class" / cls, ec);
    if (ec) continue;
    for (const auto& e : it) {
      auto name = e.path().filename().string();
      if (name != "lo" && out.size() < kMaxNics) out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpudiag::history
