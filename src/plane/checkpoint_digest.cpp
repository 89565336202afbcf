// The checkpoint digest's codec (see checkpoint_digest.h).
#include "plane/checkpoint_digest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "store/store_limits.h"

namespace gpudiag {

namespace {

constexpr std::size_t kMaxNotes = 64;

/// The missing ranks as [first, last] ranges (a lone rank as its number), at
/// most kMaxMissingRanges of them, and how many are missing in all.
void put_missing(nlohmann::json& j, const std::vector<int>& missing) {
  auto ranges = nlohmann::json::array();
  std::size_t i = 0;
  while (i < missing.size() && ranges.size() < kMaxMissingRanges) {
    std::size_t k = i;
    while (k + 1 < missing.size() && missing[k + 1] == missing[k] + 1) ++k;
    if (k == i) ranges.push_back(missing[i]);  // one rank: its number
    else ranges.push_back({missing[i], missing[k]});
    i = k + 1;
  }
  j["missing"] = std::move(ranges);
  j["missing_count"] = missing.size();
}

/// Reads "missing" back into `g` (rank `self` left out); throws when the
/// entries are not ranks or [first, last] pairs in order, inside the world, at most
/// kMaxMissingRanges, or the count is below what they list or past the world.
void take_missing(const nlohmann::json& j, int self, int size, Gathered& g) {
  const auto& ranges = j.at("missing");
  if (!ranges.is_array() || ranges.size() > kMaxMissingRanges)
    throw std::runtime_error("missing: not a bounded list of ranges");
  std::vector<int> out;
  long long next = 0, listed = 0;  // the lowest rank the next range may start at
  for (const auto& e : ranges) {
    const bool one = e.is_number_integer();
    if (!one &&
        (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer()))
      throw std::runtime_error("missing: not a rank or a [first, last] range");
    const auto a = (one ? e : e[0]).get<long long>(), b = (one ? e : e[1]).get<long long>();
    if (a < next || b < a || b >= size) throw std::runtime_error("missing: ranges out of order");
    next = b + 1;
    listed += b - a + 1;
    for (long long r = a; r <= b; ++r)
      if (r != self) out.push_back(static_cast<int>(r));
  }
  long long count = listed;
  if (auto it = j.find("missing_count"); it != j.end()) {
    if (!it->is_number_integer()) throw std::runtime_error("missing_count: not a number");
    count = it->get<long long>();
    if (count < listed || count > size) throw std::runtime_error("missing_count: out of range");
  }
  g.missing = std::move(out);
  g.missing_unlisted = static_cast<int>(count - listed);
}

/// Notes as the digest's object, in rank order: a run of consecutive ranks
/// with the same note is one key "first-last" (a lost node's 8 ranks, the
/// 64 noted ranks of a lost group: one text, not one a rank, in the digest
/// every rank reads).
nlohmann::json put_notes(const std::vector<std::pair<int, const std::string*>>& notes) {
  nlohmann::json out = nlohmann::json::object();
  for (std::size_t i = 0; i < notes.size();) {
    std::size_t k = i;
    while (k + 1 < notes.size() && notes[k + 1].first == notes[k].first + 1 &&
           *notes[k + 1].second == *notes[i].second)
      ++k;
    const std::string key = k == i ? std::to_string(notes[i].first)
                                   : std::to_string(notes[i].first) + "-" + std::to_string(notes[k].first);
    out[key] = *notes[i].second;
    i = k + 1;
  }
  return out;
}

/// Reads the notes back into `g`: keys "r" or "first-last" inside the world,
/// at most kMaxNotes ranks in all (a range is not a way to make a million).
void take_notes(const nlohmann::json& notes, int size, Gathered& g) {
  std::size_t taken = 0;
  for (const auto& [k, v] : notes.items()) {
    if (!v.is_string()) continue;
    const auto dash = k.find('-');
    auto a = storelimits::parse_bounded(k.substr(0, dash), 0, size - 1);
    auto b = dash == std::string::npos ? a : storelimits::parse_bounded(k.substr(dash + 1), 0, size - 1);
    if (!a || !b || *b < *a) continue;
    const std::string text = storelimits::store_text(v.get<std::string>(), 512);
    for (auto r = *a; r <= *b && taken < kMaxNotes; ++r, ++taken) g.notes[r] = text;
  }
}

}  // namespace

std::string encode_digest(const Gathered& g) {
  nlohmann::json j;
  put_missing(j, g.missing);
  std::vector<std::pair<int, const std::string*>> notes;
  for (std::size_t i = 0; i < g.missing.size() && i < kMaxNotes; ++i)
    notes.emplace_back(g.missing[i], &g.notes[g.missing[i]]);
  j["notes"] = put_notes(notes);
  j["aborted"] = g.aborted ? nlohmann::json(*g.aborted) : nlohmann::json(nullptr);
  j["review"] = g.review;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string encode_digest(const std::vector<int>& missing, const std::map<int, std::string>& notes,
                          const std::optional<std::string>& aborted, const std::string& review,
                          const std::map<int, std::string>& records) {
  nlohmann::json j;
  put_missing(j, missing);
  std::vector<std::pair<int, const std::string*>> kept;
  for (const auto& [r, text] : notes)
    if (kept.size() < kMaxNotes) kept.emplace_back(r, &text);
  j["notes"] = put_notes(kept);
  j["aborted"] = aborted ? nlohmann::json(*aborted) : nlohmann::json(nullptr);
  j["review"] = review.substr(0, kMaxDigestReview);
  nlohmann::json rec = nlohmann::json::object();
  for (const auto& [r, text] : records) rec[std::to_string(r)] = text;
  j["records"] = std::move(rec);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool decode_digest(const std::string& text, int self, int size, Gathered& g) {
  try {
    auto j = nlohmann::json::parse(text);
    // The fields that can throw first, before anything is taken.
    const std::string review = j.at("review").get<std::string>();
    const auto& notes = j.at("notes");
    if (!notes.is_object()) throw std::runtime_error("not a digest");
    take_missing(j, self, size, g);
    take_notes(notes, size, g);
    // Back to the default (no record) without a slot each: a rank that
    // reads a digest naming a thousand missing ranks keeps no more.
    for (int r : g.missing) g.records.erase(static_cast<std::size_t>(r));
    if (j.at("aborted").is_string())
      g.aborted = storelimits::store_text(j["aborted"].get<std::string>(), 1024);
    if (auto it = j.find("records"); it != j.end() && it->is_object()) {
      int taken = 0;
      for (const auto& [k, v] : it->items()) {
        auto r = storelimits::parse_bounded(k, 0, size - 1);
        if (r && v.is_string() && taken++ < 16 && !g.records[*r] &&
            !std::binary_search(g.missing.begin(), g.missing.end(), static_cast<int>(*r)))
          g.records[*r] = v.get<std::string>();
      }
    }
    g.review = review.substr(0, kMaxDigestReview);
    g.judged = true;
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("rank {}: ignoring a malformed checkpoint digest from the store: {}", self,
                 e.what());
    g.missing.clear();
    g.missing_unlisted = 0;
    return false;
  }
}

}  // namespace gpudiag
