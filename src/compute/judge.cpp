// The compute phase's tallies and verdicts (judge.h).
#include "compute/judge.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "util/strings.h"
#include "util/text.h"

namespace gpudiag {

namespace {

ComputeTally* find_tally(ComputeTallies& t, const std::string& model, const std::string& part) {
  for (auto& e : t)
    if (e.model == model && e.part == part) return &e;
  return nullptr;
}

const ComputeTally* find_tally(const ComputeTallies& t, const std::string& model,
                               const std::string& part) {
  return find_tally(const_cast<ComputeTallies&>(t), model, part);
}

void add(ComputeTally& e, const std::string& checksum, int count) {
  for (auto& [c, n] : e.checksums)
    if (c == checksum) {
      n += count;
      return;
    }
  e.checksums.emplace_back(checksum, count);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string fixed1(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f", v);
  return s;
}

/// "412.3 TFLOP/s"; below one TFLOP/s (a CPU) in GFLOP/s.
std::string rate(double tflops) {
  return tflops >= 1 ? fixed1(tflops) + " TFLOP/s" : fixed1(tflops * 1000) + " GFLOP/s";
}

/// "bf16, fp16 and fp32 GEMM" from the parts a record ran.
std::string parts_phrase(const ComputeRecord& r) {
  std::vector<std::string> names;
  for (const auto& p : r.parts) names.push_back(p.name.substr(0, p.name.find(' ')));
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s + " GEMM";
}

}  // namespace

int ComputeTally::total() const {
  int n = others;
  for (const auto& [c, k] : checksums) n += k;
  return n;
}

void tally_compute(ComputeTallies& t, const ComputeRecord& r) {
  if (!r.ran() || r.judged == "unstable" || r.model.empty()) return;
  for (const auto& p : r.parts) {
    auto* e = find_tally(t, r.model, p.name);
    if (!e) {
      t.push_back({r.model, p.name, {}, 0});
      e = &t.back();
    }
    add(*e, p.checksum, 1);
  }
}

void merge_compute(ComputeTallies& into, const ComputeTallies& from) {
  for (const auto& f : from) {
    auto* e = find_tally(into, f.model, f.part);
    if (!e) {
      into.push_back({f.model, f.part, {}, 0});
      e = &into.back();
    }
    for (const auto& [c, n] : f.checksums) add(*e, c, n);
    e->others += f.others;
  }
}

void bound_compute(ComputeTallies& t) {
  for (auto& e : t) {
    std::sort(e.checksums.begin(), e.checksums.end(),
              [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    while (e.checksums.size() > kTallyChecksums) {
      e.others += e.checksums.back().second;
      e.checksums.pop_back();
    }
  }
  std::sort(t.begin(), t.end(), [](const auto& a, const auto& b) {
    return a.total() != b.total() ? a.total() > b.total()
                                  : std::tie(a.model, a.part) < std::tie(b.model, b.part);
  });
  if (t.size() > kMaxComputeTallies) t.resize(kMaxComputeTallies);  // those ranks go uncompared
}

nlohmann::json compute_tallies_json(const ComputeTallies& t) {
  auto out = nlohmann::json::array();
  for (const auto& e : t)
    out.push_back({{"model", e.model}, {"part", e.part}, {"checksums", e.checksums}, {"others", e.others}});
  return out;
}

ComputeTallies compute_tallies_from_json(const nlohmann::json& j) {
  ComputeTallies t;
  if (!j.is_array()) return t;
  constexpr long long kMaxCount = 1 << 30;
  for (const auto& e : j) {
    if (t.size() >= kMaxComputeTallies) break;
    if (!e.is_object() || !e.contains("model") || !e["model"].is_string() || !e.contains("part") ||
        !e["part"].is_string() || !e.contains("checksums") || !e["checksums"].is_array())
      continue;
    ComputeTally tally{clean_text(e["model"].get<std::string>().substr(0, 256)),
                       clean_text(e["part"].get<std::string>().substr(0, 64)), {}, 0};
    if (auto o = e.find("others"); o != e.end() && o->is_number_integer())
      tally.others = static_cast<int>(std::clamp<long long>(o->get<long long>(), 0, kMaxCount));
    for (const auto& c : e["checksums"]) {
      if (tally.checksums.size() >= kTallyChecksums) break;
      if (!c.is_array() || c.size() != 2 || !c[0].is_string() || !c[1].is_number_integer()) continue;
      const long long n = c[1].get<long long>();
      if (n < 1 || n > kMaxCount || c[0].get_ref<const std::string&>().size() > 64) continue;
      tally.checksums.emplace_back(clean_text(c[0].get<std::string>()), static_cast<int>(n));
    }
    t.push_back(std::move(tally));
  }
  return t;
}

ComputeJudgement judge_compute(const ComputeTallies& t, const ComputeRecord& mine) {
  if (!mine.ran()) return {};
  if (mine.judged == "unstable") return {mine.judged, mine.finding};
  const std::string unit = mine.device == "gpu" ? "GPUs" : "ranks";
  int compared = 0, alone = 0;
  for (const auto& p : mine.parts) {
    const ComputeTally* e = find_tally(t, mine.model, p.name);
    if (!e) continue;
    const int n = e->total();
    if (n < 2) {
      ++alone;
      continue;
    }
    ++compared;
    // The reference: more ranks than any other checksum, and at least two.
    const auto& top = e->checksums.empty() ? std::pair<std::string, int>{"", 0} : e->checksums[0];
    const int second = e->checksums.size() > 1 ? e->checksums[1].second : 0;
    const bool reference = top.second >= 2 && top.second > second;
    if (reference && p.checksum == top.first) continue;
    std::string finding;
    if (reference) {
      finding = "compute result differs from " + std::to_string(top.second) + " of " +
                std::to_string(n) + " " + unit + " of its model (" + p.name + ", checksum " +
                p.checksum + ", theirs " + top.first + ")";
    } else if (n == 2) {
      std::string other;
      for (const auto& [c, k] : e->checksums)
        if (c != p.checksum) other = c;
      finding = "compute result differs from the other of the 2 " + unit + " of its model (" + p.name +
                ", checksum " + p.checksum + (other.empty() ? "" : ", the other's " + other) +
                "); with two the bad one cannot be named: a third of this model would name it";
    } else {
      finding = "compute result: no checksum is shared by more of the " + std::to_string(n) + " " +
                unit + " of its model than every other (" + p.name + ", checksum " + p.checksum +
                ", " + std::to_string(e->checksums.size() + (e->others > 0)) + " or more distinct)";
    }
    return {"differs", finding};
  }
  if (compared > 0) return {"agrees", ""};
  if (alone > 0) return {"alone", ""};
  return {};
}

std::vector<std::pair<int, std::string>> slow_ranks(const std::vector<ComputeRank>& ranks) {
  std::map<std::string, std::vector<double>> rates;
  for (const auto& r : ranks)
    if (r.compute && r.compute->ran() && !r.compute->failed() && r.compute->tflops > 0)
      rates[r.compute->model].push_back(r.compute->tflops);
  std::vector<std::pair<int, std::string>> out;
  for (const auto& r : ranks) {
    if (!r.compute || !r.compute->ran() || r.compute->failed()) continue;
    const auto& v = rates[r.compute->model];
    if (v.size() < 2) continue;
    const double m = median(v);
    if (!(m > 0) || r.compute->tflops >= kComputeSlowFraction * m) continue;
    out.emplace_back(r.rank, r.label + ": " + rate(r.compute->tflops) + ", " +
                                 std::to_string(static_cast<int>(100 * r.compute->tflops / m)) +
                                 "% of the median of the " + std::to_string(v.size()) + " " +
                                 (r.compute->device == "gpu" ? "GPUs" : "ranks") + " of its model, " +
                                 r.compute->model + " (" + rate(m) + ")" +
                                 (r.compute->device == "gpu" ? "; " + clocks_text(r.compute->clocks) : ""));
  }
  return out;
}

std::string compute_slow_warning(const std::string& slow_text) {
  return "compute SLOW: " + slow_text +
         "; a GPU held below its clocks (power, heat) slows the whole job: see nvidia-smi -q -d "
         "PERFORMANCE,CLOCK";
}

std::string compute_summary(const std::vector<ComputeRank>& ranks, bool rates_judged,
                            const std::string& not_judged_why) {
  struct Model {
    std::vector<double> tflops;
    int ran = 0, known = 0;  ///< known: judged by the known checksums (compute/known.h)
  };
  std::map<std::string, Model> models;
  std::vector<double> seconds;
  std::vector<int> differ, unstable;
  const ComputeRecord* any = nullptr;
  int ran = 0, matches = 0;
  bool differ_known = true;  ///< every rank that differs differs from the known checksums
  for (const auto& r : ranks) {
    if (!r.compute || !r.compute->ran()) continue;
    any = any ? any : r.compute;
    ++ran;
    matches += r.compute->known == "matches";
    if (r.compute->judged == "differs" && r.compute->known != "differs") differ_known = false;
    seconds.push_back(r.compute->seconds);
    auto& m = models[r.compute->model];
    ++m.ran;
    m.known += !r.compute->known.empty();
    if (r.compute->judged == "differs") differ.push_back(r.rank);
    if (r.compute->judged == "unstable") unstable.push_back(r.rank);
    if (!r.compute->failed()) m.tflops.push_back(r.compute->tflops);
  }
  if (!any) return "";
  const int bad = static_cast<int>(differ.size() + unstable.size());
  std::string line = "compute: " + parts_phrase(*any) +
                     (ran == 1 ? " on 1 rank ("
                               : " checksums identical " +
                                     std::string(models.size() > 1 ? "within each model " : "") +
                                     "on " + (bad ? std::to_string(ran - bad) + " of " : "") +
                                     std::to_string(ran) + " ranks (");
  std::vector<std::string> parts, pairs;
  for (const auto& [model, m] : models) {
    std::string p = model;
    if (models.size() > 1) p += ": " + std::to_string(m.ran) + (m.ran == 1 ? " rank" : " ranks");
    if (m.ran == 1 && m.known == 0) p += ", nothing to compare with";
    if (m.ran == 2 && m.known < 2) pairs.push_back(model);
    if (!m.tflops.empty()) p += ", median " + rate(median(m.tflops));
    parts.push_back(p);
  }
  line += join(parts, "; ") + "), " + human_seconds(median(seconds));
  if (matches > 0)
    line += matches == ran ? ", matching the known checksums"
                           : "; " + std::to_string(matches) + " of " + std::to_string(ran) +
                                 " ranks matching the known checksums";
  if (!differ.empty())
    line += "; " + std::string(differ.size() == 1 ? "rank " : "ranks ") + format_ranks(differ) +
            (differ.size() == 1 ? " differs" : " differ") + (differ_known ? " from the known checksums" : "");
  if (!unstable.empty()) line += "; " + std::string(unstable.size() == 1 ? "rank " : "ranks ") + format_ranks(unstable) + " changed between repetitions";
  if (!pairs.empty())
    line += "; with 2 ranks of " + join(pairs, ", ") +
            " a difference cannot name the bad one: a third of the model would";
  if (!rates_judged) line += "; rate not judged (" + not_judged_why + ")";
  return line + "\n";
}

}  // namespace gpudiag
