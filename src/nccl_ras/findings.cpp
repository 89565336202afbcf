// finding_lines(), summary_line(), caveat_lines(), report_json() (findings.h).
#include "nccl_ras/findings.h"

#include <algorithm>
#include <cstdio>

#include "nccl_ras/motion.h"
#include "util/text.h"

namespace gpudiag::ras {

namespace {

std::string plural(long long n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string process_name(const ProcessRef& p, const ProcessNamer& name) {
  if (name) {
    if (auto n = name(p); !n.empty()) return n;
  }
  if (p.pid < 0) return {};
  return "process " + std::to_string(p.pid) + (p.host.empty() ? "" : " on " + clean_text(p.host));
}

/// "rank 3 of communicator 5a1e..." for each rank `p` holds among the missing.
std::string ranks_of(const Report& r, const ProcessRef& p) {
  std::string out;
  for (const auto& m : r.missing)
    for (const auto& k : m.ranks)
      if (k.process.same(p))
        out += (out.empty() ? "" : ", ") +
               ("rank " + std::to_string(k.rank) + " of communicator " + clean_text(m.comm));
  return out;
}

std::string process_line(const Report& r, const ProcessRef& p, const ProcessNamer& name) {
  std::string what;
  if (!p.gpus.empty()) what = "GPU " + clean_text(p.gpus);
  if (auto ranks = ranks_of(r, p); !ranks.empty()) what += (what.empty() ? "" : "; ") + ranks;
  return process_name(p, name) + (what.empty() ? "" : " (" + what + ")");
}

/// "rank 3", "ranks 4-7", or "3 ranks" when RAS named none.
std::string rank_numbers(const ValueGroup& g) {
  if (g.ranks.empty()) return plural(g.count, "rank", "ranks");
  std::vector<long long> numbers;
  for (const auto& k : g.ranks) numbers.push_back(k.rank);
  return (g.ranks.size() == 1 ? "rank " : "ranks ") + rank_list(numbers);
}

/// rank_numbers(), with the processes of a group of one or two ("rank 1 ([node0-1] pid 41)"),
/// and how many more ranks RAS counted than it named.
std::string group_ranks(const ValueGroup& g, const ProcessNamer& name) {
  std::string out = rank_numbers(g);
  if (g.ranks.empty()) return out;
  if (g.ranks.size() <= 2) {
    std::string who;
    for (const auto& k : g.ranks)
      if (auto n = process_name(k.process, name); !n.empty()) who += (who.empty() ? "" : ", ") + n;
    if (!who.empty()) out += " (" + who + ")";
  }
  if (g.count > static_cast<long long>(g.ranks.size()))
    out += " and " + std::to_string(g.count - static_cast<long long>(g.ranks.size())) + " more";
  return out;
}

std::string comm_name(const Mismatch& m) {
  return "communicator " + clean_text(m.comm) +
         (m.comm_size > 0 ? " (" + plural(m.comm_size, "rank", "ranks") + ")" : "");
}

constexpr const char* kUnreliable = "; unreliable (NCCL before 2.29.2)";

/// "ranks 0-2 issued 120, rank 3 (process 4003 on 10.0.0.1) issued 119", or for states
/// "3 ranks RUNNING, rank 2 (...) ABORT".
std::string groups_text(const std::vector<ValueGroup>& groups, bool state,
                        const ProcessNamer& name) {
  std::string out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    out += (i ? ", " : "") + group_ranks(g, name) + " " +
           (state            ? clean_text(g.value)
            : g.value == "0" ? std::string("issued none")
                             : "issued " + clean_text(g.value));
  }
  return out;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

/// A fault: ranks in different states, or counts behind that did not move (`behind:` names
/// the ranks of those groups).
std::string mismatch_line(const Mismatch& m, const ProcessNamer& name) {
  const bool state = !m.counts();
  std::string line = (state ? "state: " : "mismatch: ") + comm_name(m) + ": " +
                     (state ? std::string("ranks are in different states")
                            : clean_text(m.what) + " counts differ") +
                     ": " + groups_text(m.groups, state, name);
  std::vector<std::string> behind;
  for (const auto& g : m.groups)
    if (!state && std::find(m.still.begin(), m.still.end(), g.value) != m.still.end())
      behind.push_back(rank_numbers(g));
  if (!behind.empty()) {
    line += "; behind: ";
    for (std::size_t i = 0; i < behind.size(); ++i) line += (i ? ", " : "") + behind[i];
  }
  return line;
}

/// Counts that differ and moved between the samples, or whose motion is not known. These
/// lines never say a rank is behind: nothing shows that one is.
std::string motion_line(const Report& r, const Mismatch& m, const ProcessNamer& name) {
  std::string line = (m.motion == Motion::moved ? "in flight: " : "unconfirmed: ") + comm_name(m) +
                     ": " + clean_text(m.what) +
                     " counts differ: " + groups_text(m.groups, false, name);
  if (r.samples < 2) {
    return line + "; one sample only" +
           (r.one_sample_why.empty() ? std::string() : " (" + clean_text(r.one_sample_why) + ")") +
           ": whether they are moving is not known";
  }
  const std::string later = seconds_text(r.sample_gap_s) + " later: ";
  if (m.motion == Motion::moved)
    return line + "; " + later +
           (m.later.empty() ? std::string("they agree") : groups_text(m.later, false, name)) +
           ": collectives in flight, not a fault";
  return line + "; " + later + groups_text(m.later, false, name) +
         ": whether every rank moved cannot be told";
}

}  // namespace

std::vector<std::string> motion_lines(const Report& r, const ProcessNamer& name) {
  std::vector<std::string> out;
  for (const auto& m : r.mismatches)
    if (m.counts() && m.motion != Motion::still)
      out.push_back(motion_line(r, m, name) + (r.rows_unreliable ? kUnreliable : ""));
  return out;
}

std::vector<std::string> finding_lines(const Report& r, const ProcessNamer& name) {
  std::vector<std::string> out;
  for (const auto& p : r.dead)
    out.push_back("dead: " + process_line(r, p, name) + ": RAS cannot reach it over its network");
  if (r.dead_count > static_cast<long long>(r.dead.size()))
    out.push_back("dead: " + plural(r.dead_count, "process", "processes") + " in all (RAS named " +
                  std::to_string(r.dead.size()) + ")");
  for (const auto& p : r.unresponsive)
    out.push_back("unresponsive: " + process_line(r, p, name) +
                  ": no answer to RAS within its timeout (stopped, hung, or overloaded)");
  if (r.unresponsive_count > static_cast<long long>(r.unresponsive.size()))
    out.push_back("unresponsive: " + plural(r.unresponsive_count, "process", "processes") +
                  " in all (RAS named " + std::to_string(r.unresponsive.size()) + ")");
  for (const auto& m : r.missing) {
    // Ranks whose process no line above names (2.24 gives rank numbers only).
    std::vector<long long> unnamed;
    for (const auto& k : m.ranks)
      if (k.process.pid < 0) unnamed.push_back(k.rank);
    if (!unnamed.empty() || m.ranks.empty())
      out.push_back("no data: communicator " + clean_text(m.comm) + ": " +
                    (unnamed.empty() ? plural(m.count, "rank", "ranks")
                                     : std::string(unnamed.size() == 1 ? "rank " : "ranks ") +
                                           rank_list(unnamed)) +
                    " did not answer RAS" + (r.rows_unreliable ? kUnreliable : ""));
  }
  for (const auto& m : r.mismatches)
    if (!m.counts() || m.motion == Motion::still)
      out.push_back(mismatch_line(m, name) + (r.rows_unreliable ? kUnreliable : ""));
  for (const auto& e : r.errors) {
    ValueGroup g{"", e.count, e.ranks};
    out.push_back("error: communicator " + clean_text(e.comm) + ": " + group_ranks(g, name) +
                  " reported " +
                  (e.phase == "initialization" ? "an initialization" : "an asynchronous") +
                  " error: " + clean_text(e.error) + (r.rows_unreliable ? kUnreliable : ""));
  }
  return out;
}

std::string summary_line(const Report& r) {
  std::string line = "NCCL " + clean_text(r.nccl_version) + " (" + r.format + ")";
  std::vector<std::string> parts;
  if (r.processes >= 0)
    parts.push_back(plural(r.processes, "process", "processes") +
                    (r.nodes >= 0 ? " on " + plural(r.nodes, "node", "nodes") : ""));
  if (r.communicators >= 0)
    parts.push_back(plural(r.communicators, "communicator", "communicators"));
  if (r.collection_s >= 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "gathered in %.3f s", r.collection_s);
    parts.push_back(buf);
  }
  for (std::size_t i = 0; i < parts.size(); ++i) line += (i ? ", " : ": ") + parts[i];
  return line;
}

std::vector<std::string> caveat_lines(const Report& r) {
  std::vector<std::string> out;
  if (r.timeouts > 0)
    out.push_back("RAS timed out " + plural(r.timeouts, "time", "times") +
                  " while it gathered: its view of the job is partial");
  if (r.rows_unreliable)
    out.push_back(
        "NCCL " + clean_text(r.nccl_version) +
        "'s text report reads the communicators after one with missing ranks from the "
        "wrong bytes (fixed in 2.29.2): its per-communicator lines are unreliable, its "
        "dead and unresponsive processes are not" +
        (r.nccl_version >= std::string("2.28.7") ? "; --format json reads them right" : ""));
  if (r.samples == 2 && counts_differ(r)) {
    const bool still = std::any_of(r.mismatches.begin(), r.mismatches.end(),
                                   [](const Mismatch& m) { return m.motion == Motion::still; });
    out.push_back("counts that differed were sampled twice, " + seconds_text(r.sample_gap_s) +
                  " apart" + (still ? ": a count that did not move is where the job waits" : ""));
  }
  for (const auto& n : r.notes) out.push_back(clean_text(n));
  return out;
}

namespace {

nlohmann::json process_json(const ProcessRef& p) {
  return {{"host", clean_text(p.host)}, {"pid", p.pid}, {"gpus", clean_text(p.gpus)}};
}

nlohmann::json ranks_json(const std::vector<RankRef>& ranks) {
  auto out = nlohmann::json::array();
  for (const auto& k : ranks) {
    auto j = process_json(k.process);
    j["rank"] = k.rank;
    out.push_back(j);
  }
  return out;
}

}  // namespace

nlohmann::json report_json(const Report& r) {
  nlohmann::json j{{"nccl_version", clean_text(r.nccl_version)},
                   {"format", r.format},
                   {"nodes", r.nodes},
                   {"processes", r.processes},
                   {"gpus", r.gpus},
                   {"communicators", r.communicators},
                   {"dead_count", r.dead_count},
                   {"unresponsive_count", r.unresponsive_count},
                   {"timeouts", r.timeouts},
                   {"collection_time_sec", r.collection_s}};
  j["dead"] = nlohmann::json::array();
  for (const auto& p : r.dead) j["dead"].push_back(process_json(p));
  j["unresponsive"] = nlohmann::json::array();
  for (const auto& p : r.unresponsive) j["unresponsive"].push_back(process_json(p));
  j["missing"] = nlohmann::json::array();
  for (const auto& m : r.missing)
    j["missing"].push_back(
        {{"comm", clean_text(m.comm)}, {"count", m.count}, {"ranks", ranks_json(m.ranks)}});
  j["mismatches"] = nlohmann::json::array();
  for (const auto& m : r.mismatches) {
    auto groups = nlohmann::json::array();
    for (const auto& g : m.groups)
      groups.push_back(
          {{"value", clean_text(g.value)}, {"count", g.count}, {"ranks", ranks_json(g.ranks)}});
    auto later = nlohmann::json::array();
    for (const auto& g : m.later)
      later.push_back(
          {{"value", clean_text(g.value)}, {"count", g.count}, {"ranks", ranks_json(g.ranks)}});
    const char* motion = m.motion == Motion::moved   ? "moved"
                         : m.motion == Motion::still ? "still"
                                                     : "unknown";
    j["mismatches"].push_back({{"comm", clean_text(m.comm)},
                               {"comm_size", m.comm_size},
                               {"what", clean_text(m.what)},
                               {"groups", groups},
                               {"motion", m.counts() ? nlohmann::json(motion) : nlohmann::json()},
                               {"still", m.still},
                               {"later_groups", later}});
  }
  j["errors"] = nlohmann::json::array();
  for (const auto& e : r.errors)
    j["errors"].push_back({{"comm", clean_text(e.comm)},
                           {"phase", e.phase},
                           {"error", clean_text(e.error)},
                           {"count", e.count},
                           {"ranks", ranks_json(e.ranks)}});
  j["samples"] = r.samples;
  j["sample_gap_sec"] = r.sample_gap_s;
  j["one_sample_why"] = clean_text(r.one_sample_why);
  j["rows_unreliable"] = r.rows_unreliable;
  j["notes"] = caveat_lines(r);
  return j;
}

}  // namespace gpudiag::ras
