// See render.h. Lateness is said in ms (one decimal below 10 ms), shares in
// whole percent; a group by its number as the ranks count them (0 the
// default group, k the k-th new_group()) and its members.
#include "stragglers/render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "world/fingerprint_compare.h"

namespace gpudiag::stragglers {

namespace {

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.1f" : "%.0f", v);
  return buf;
}

std::string percent(double share) {
  return std::to_string(static_cast<int>(std::lround(share * 100))) + "%";
}

std::string who(int rank, const RankLabel& label) {
  const std::string l = label ? label(rank) : std::string();
  return "rank " + std::to_string(rank) + (l.empty() ? "" : " " + l);
}

std::string where_tail(const Episode& e) {
  if (e.gpu) return "; where: " + e.where + ", on its GPU (NCCL's kernel times: its kernel started last)";
  return e.where.empty() ? "" : "; where: " + e.where;
}

const char* on_gpu(const Episode& e) { return e.gpu ? " on its GPU" : ""; }

}  // namespace

std::string group_words(int group, const std::vector<int>& members) {
  if (group == 0) return "the default group, " + std::to_string(members.size()) + " ranks";
  return "ranks " + compress_ranks(members);  // "0-7,9", cut past 80 characters
}

JudgeSummary merged(const JudgeSummary& host, const JudgeSummary& kernels) {
  JudgeSummary out = host;
  for (const auto& g : kernels.groups) out.kernels += g.judged;
  for (const auto& e : kernels.episodes) {
    const bool said = std::any_of(host.episodes.begin(), host.episodes.end(), [&](const Episode& h) {
      return h.rank == e.rank && h.group == e.group;
    });
    if (!said) out.episodes.push_back(e);
  }
  out.incomplete += kernels.incomplete;
  out.untracked += kernels.untracked;
  return out;
}

std::string event_line(const Event& ev, int window, const RankLabel& label) {
  const Episode& e = ev.episode;
  const std::string g = "group " + std::to_string(e.group) + " (" + group_words(e.group, e.members) + ")";
  if (ev.recovered)
    return "straggler: " + who(e.rank, label) + " recovered in " + g + " at collective " +
           std::to_string(e.to_seq) + ": late at " + percent(ev.share_now) + " of the last " +
           std::to_string(window) + " (it was " + ms(e.late_ms) + " ms late at " +
           percent(e.share) + " of " + std::to_string(e.judged) + " collectives from collective " +
           std::to_string(e.from_seq) + ")";
  return "straggler: " + who(e.rank, label) + " arrives " + ms(e.late_ms) + " ms late" + on_gpu(e) + " at " +
         percent(e.share) + " of collectives in " + g + ", the last " + std::to_string(e.judged) +
         " from collective " + std::to_string(e.from_seq) + ", mostly at " + e.op +
         "; the others wait for it" + where_tail(e);
}

std::vector<std::string> summary_lines(const JudgeSummary& s, const Heard& heard,
                                       const RankLabel& label) {
  std::vector<std::string> out;
  std::int64_t judged = 0;
  for (const auto& g : s.groups) judged += g.judged;
  std::string measured = std::to_string(judged) + " collective" + (judged == 1 ? "" : "s") +
                         " judged in " + std::to_string(s.groups.size()) + " group" +
                         (s.groups.size() == 1 ? "" : "s");
  if (s.kernels > 0)
    measured += ", " + std::to_string(s.kernels) + " by their NCCL kernel times";
  if (heard.dropped > 0) measured += ", " + std::to_string(heard.dropped) + " records lost by the ranks";
  if (heard.invalid > 0) measured += ", " + std::to_string(heard.invalid) + " refused";
  if (heard.unshared > 0)
    measured += ", " + std::to_string(heard.unshared) + " records not shared with the other nodes";
  if (heard.missed > 0)
    measured += ", " + std::to_string(heard.missed) + " batches of other nodes' records missed";
  if (judged == 0 && s.kernels == 0) {
    out.push_back("stragglers: not measured (no collective was reported by every rank of its group"
                  "; only Python ranks using torch.distributed are measured)");
    return out;
  }
  if (s.episodes.empty()) {
    out.push_back("stragglers: none (" + measured + ")");
    return out;
  }
  out.push_back("stragglers: " + std::to_string(s.episodes.size()) + " named (" + measured + ")");
  for (const auto& e : s.episodes)
    out.push_back("straggler: " + who(e.rank, label) + " arrived " + ms(e.late_ms) +
                  " ms late" + on_gpu(e) + " at " + percent(e.share) + " of collectives in group " +
                  std::to_string(e.group) + " (" + group_words(e.group, e.members) +
                  ") from collective " + std::to_string(e.from_seq) +
                  (e.to_seq < 0 ? " to the end" : " to " + std::to_string(e.to_seq) + ", then recovered") +
                  ", mostly at " + e.op + where_tail(e));
  return out;
}

nlohmann::json summary_json(const JudgeSummary& s, const Heard& heard, const RankLabel& label) {
  nlohmann::json groups = nlohmann::json::array(), named = nlohmann::json::array();
  std::int64_t judged = 0;
  for (const auto& g : s.groups) {
    judged += g.judged;
    groups.push_back({{"group", g.group}, {"ranks", g.members}, {"collectives", g.judged}});
  }
  for (const auto& e : s.episodes) {
    nlohmann::json j = {{"rank", e.rank},
                        {"group", e.group},
                        {"late_ms", std::round(e.late_ms * 1000) / 1000},
                        {"late_share", std::round(e.share * 1000) / 1000},
                        {"from_collective", e.from_seq},
                        {"named_at_collective", e.named_at},
                        {"to_collective", nullptr},
                        {"recovered", e.to_seq >= 0},
                        {"collectives", e.judged},
                        {"op", e.op},
                        {"source", e.gpu ? "nccl_kernels" : "host"},
                        {"where", e.where.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.where)}};
    if (e.to_seq >= 0) j["to_collective"] = e.to_seq;
    if (label) j["label"] = label(e.rank);
    named.push_back(std::move(j));
  }
  return {{"measured", judged > 0 || s.kernels > 0},  {"collectives", judged},
          {"kernel_collectives", s.kernels},
          {"groups", groups},        {"named", named},
          {"incomplete", s.incomplete}, {"records", heard.records},
          {"refused", heard.invalid}, {"lost_by_ranks", heard.dropped},
          {"unshared", heard.unshared}, {"missed_batches", heard.missed}};
}

void add_samples(PromText& prom, const JudgeSummary& s, const std::string& host,
                 const RankLabel& label) {
  for (const auto& g : s.groups)
    prom.gauge("gpudiag_stragglers_collectives",
               "Collectives judged for stragglers (every member's arrival known), by group",
               {{"host", host}, {"group", std::to_string(g.group)}}, static_cast<double>(g.judged));
  int now = 0;
  for (const auto& e : s.episodes) {
    PromLabels l = {{"host", host},
                    {"rank", std::to_string(e.rank)},
                    {"label", label ? label(e.rank) : ""},
                    {"group", std::to_string(e.group)},
                    {"from_collective", std::to_string(e.from_seq)},
                    {"source", e.gpu ? "nccl_kernels" : "host"}};
    const bool named = e.to_seq < 0;
    now += named;
    prom.gauge("gpudiag_straggler", "1 while the rank is named a straggler, 0 once it recovered",
               l, named ? 1 : 0);
    prom.gauge("gpudiag_straggler_late_seconds",
               "Median lateness of the rank at the collectives it was late at", l, e.late_ms / 1e3);
    prom.gauge("gpudiag_straggler_late_ratio", "Share of the collectives the rank was late at", l,
               e.share);
  }
  prom.gauge("gpudiag_stragglers_named", "Ranks named stragglers now", {{"host", host}}, now);
}

}  // namespace gpudiag::stragglers
