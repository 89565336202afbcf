// The checkpoint digest's codec (see checkpoint_digest.h).
#include "rendezvous/checkpoint_digest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "rendezvous/store_limits.h"

namespace gpudiag {

namespace {
constexpr std::size_t kMaxNotes = 64;
}

std::string encode_digest(const Gathered& g) {
  nlohmann::json j;
  j["missing"] = g.missing;
  nlohmann::json notes = nlohmann::json::object();
  for (std::size_t i = 0; i < g.missing.size() && i < kMaxNotes; ++i)
    notes[std::to_string(g.missing[i])] = g.notes[g.missing[i]];
  j["notes"] = std::move(notes);
  j["aborted"] = g.aborted ? nlohmann::json(*g.aborted) : nlohmann::json(nullptr);
  j["review"] = g.review;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string encode_digest(const std::vector<int>& missing, const std::map<int, std::string>& notes,
                          const std::optional<std::string>& aborted, const std::string& review,
                          const std::map<int, std::string>& records) {
  nlohmann::json j;
  j["missing"] = missing;
  nlohmann::json n = nlohmann::json::object();
  std::size_t kept = 0;
  for (const auto& [r, text] : notes)
    if (kept++ < kMaxNotes) n[std::to_string(r)] = text;
  j["notes"] = std::move(n);
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
    if (!j.at("missing").is_array() || !notes.is_object()) throw std::runtime_error("not a digest");
    for (const auto& m : j.at("missing")) {
      const int r = m.get<int>();
      if (r >= 0 && r < size && r != self && (g.missing.empty() || r > g.missing.back()))
        g.missing.push_back(r);
    }
    for (const auto& [k, v] : notes.items()) {
      auto r = storelimits::parse_bounded(k, 0, size - 1);
      if (r && v.is_string()) g.notes[*r] = storelimits::store_text(v.get<std::string>(), 512);
    }
    for (int r : g.missing) g.records[r].reset();
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
    return false;
  }
}

}  // namespace gpudiag
