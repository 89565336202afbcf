// A sweep round's results, folded by rank pair where they are (see
// tree_results.h): by rank 0 in a flat job, by the groups' judges and the
// root under node leaders.
#include "sweep/tree_results.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "checks/tree_review.h"
#include "util/text.h"

namespace gpudiag::sweep {

namespace {

using nlohmann::json;

constexpr double kMostGbps = 1e6;

std::string cut_why(const std::string& s) { return clean_text(s.substr(0, kMaxResultWhy)); }

}  // namespace

void fold_ends(PairEnds& into, const PairEnds& other) {
  if (into.ends & other.ends) return;  // an end reported twice: the first stands
  // a's reason first when a failed: whichever side holds end a.
  const PairEnds& with_a = (into.ends & 1u) ? into : other;
  const PairEnds& with_b = (into.ends & 1u) ? other : into;
  std::string why = !with_a.ok ? with_a.why : !with_b.ok ? with_b.why : std::string();
  into.ok = into.ok && other.ok;
  into.gbps = std::max(into.gbps, other.gbps);
  into.why = std::move(why);
  into.ends |= other.ends;
}

bool RoundResults::add_report(int rank, const std::string& report, int world) {
  const json j = json::parse(report, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  const auto k = j.value("k", -1);
  const auto p = j.value("p", -2);
  const auto gbps = j.value("gbps", -1.0);
  if (k != round_ || rank < 0 || rank >= world || p < 0 || p >= world || p == rank ||
      !std::isfinite(gbps) || gbps < 0 || gbps > kMostGbps)
    return false;
  PairEnds e;
  e.a = std::min(rank, p);
  e.b = std::max(rank, p);
  e.ends = rank == e.a ? 1u : 2u;
  e.ok = j.value("ok", false);
  e.gbps = e.ok ? gbps : 0;
  if (!e.ok)
    if (auto w = j.find("why"); w != j.end() && w->is_string()) e.why = cut_why(w->get<std::string>());
  add(e);
  return true;
}

void RoundResults::add(const PairEnds& p) {
  auto [it, fresh] = pairs_.try_emplace({p.a, p.b}, p);
  if (!fresh) fold_ends(it->second, p);
}

void RoundResults::add(const RoundResults& other) {
  for (const auto& [key, p] : other.pairs_) add(p);
  cut_ += other.cut_;
}

std::string RoundResults::encode(std::size_t budget) const {
  std::string pairs;
  int cut = cut_;
  const std::size_t room = budget > 64 ? budget - 64 : 0;  // the frame and the counts
  for (const auto& [key, p] : pairs_) {
    const std::string one =
        json::array({p.a, p.b, p.ends, p.ok, p.gbps, p.why}).dump(-1, ' ', false,
                                                                   json::error_handler_t::replace);
    if (pairs.size() + one.size() + 1 > room) {
      ++cut;
      continue;
    }
    if (!pairs.empty()) pairs += ',';
    pairs += one;
  }
  return "{\"k\":" + std::to_string(round_) + ",\"pairs\":[" + pairs +
         "],\"cut\":" + std::to_string(cut) + "}";
}

std::optional<RoundResults> RoundResults::decode(const std::string& text, int first, int last,
                                                 int world) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto k = j.find("k"), pairs = j.find("pairs");
  if (k == j.end() || !k->is_number_integer() || pairs == j.end() || !pairs->is_array())
    return std::nullopt;
  RoundResults out(k->get<int>());
  if (auto c = j.find("cut"); c != j.end() && c->is_number_integer() && c->get<long long>() > 0)
    out.cut_ = static_cast<int>(std::min<long long>(c->get<long long>(), world));
  auto inside = [&](int r) { return r >= first && r <= last; };
  for (const auto& e : *pairs) {
    if (!e.is_array() || e.size() != 6 || !e[0].is_number_integer() || !e[1].is_number_integer() ||
        !e[2].is_number_integer() || !e[3].is_boolean() || !e[4].is_number() || !e[5].is_string())
      continue;
    PairEnds p;
    p.a = e[0].get<int>();
    p.b = e[1].get<int>();
    const auto ends = e[2].get<long long>();
    p.ok = e[3].get<bool>();
    p.gbps = e[4].get<double>();
    if (p.a < 0 || p.a >= p.b || p.b >= world || ends < 1 || ends > 3 || !std::isfinite(p.gbps) ||
        p.gbps < 0 || p.gbps > kMostGbps)
      continue;
    p.ends = static_cast<unsigned>(ends);
    // What a sender says of ranks it does not speak for is not believed.
    if (((p.ends & 1u) && !inside(p.a)) || ((p.ends & 2u) && !inside(p.b))) continue;
    if (p.ok) p.why.clear();
    else p.why = cut_why(e[5].get<std::string>());
    out.add(p);
  }
  return out;
}

std::vector<PairResult> RoundResults::pair_results() const {
  std::vector<PairResult> out;
  out.reserve(pairs_.size());
  for (const auto& [key, p] : pairs_) out.push_back({round_, p.a, p.b, p.ok, p.gbps, p.why});
  return out;
}

std::optional<int> results_round(const std::string& checkpoint) {
  constexpr const char* kPrefix = "sweep-";
  if (checkpoint.rfind(kPrefix, 0) != 0) return std::nullopt;
  const std::string tail = checkpoint.substr(6);
  if (tail.empty() || tail.size() > 9 || tail.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoi(tail);
}

namespace {
bool sweep_checkpoint(const std::string& name) { return name.rfind("sweep-", 0) == 0; }
}  // namespace

std::string SweepTreeReviewer::review(const std::string& checkpoint,
                                      const std::map<int, std::string>& records,
                                      const std::vector<int>& missing,
                                      const std::map<int, std::string>& notes) {
  if (auto k = results_round(checkpoint)) {
    RoundResults rr(*k);
    for (const auto& [r, text] : records) rr.add_report(r, text, world_);
    return rr.encode(kGroupResultsBudget);
  }
  if (sweep_checkpoint(checkpoint)) return {};
  return others_->review(checkpoint, records, missing, notes);
}

std::string SweepTreeReviewer::merge(const std::string& checkpoint,
                                     const std::vector<ChildReview>& reviews) {
  // The root's merge is the digest's review, which every rank reads: a
  // round's results go to rank 0 alone (for_judge).
  if (sweep_checkpoint(checkpoint)) return {};
  return others_->merge(checkpoint, reviews);
}

std::string SweepTreeReviewer::for_judge(const std::string& checkpoint,
                                         const std::vector<ChildReview>& reviews) {
  auto k = results_round(checkpoint);
  if (!k) return others_->for_judge(checkpoint, reviews);
  RoundResults all(*k);
  for (const auto& c : reviews) {
    auto part = RoundResults::decode(c.text, c.first, c.last, world_);
    if (part && part->round() == *k) all.add(*part);
  }
  return all.encode(kJudgeResultsBudget);
}

std::string SweepTreeReviewer::merge_up(const std::string& checkpoint,
                                        const std::vector<ChildReview>& reviews) {
  auto k = results_round(checkpoint);
  if (!k) return sweep_checkpoint(checkpoint) ? std::string() : others_->merge_up(checkpoint, reviews);
  RoundResults all(*k);
  for (const auto& c : reviews) {
    auto part = RoundResults::decode(c.text, c.first, c.last, world_);
    if (part && part->round() == *k) all.add(*part);
  }
  return all.encode(kGroupResultsBudget);
}

std::unique_ptr<TreeReviewer> job_reviewer(int world) {
  return std::make_unique<SweepTreeReviewer>(world, std::make_unique<CheckTreeReviewer>());
}

}  // namespace gpudiag::sweep
