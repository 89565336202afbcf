// A node's hardware verdict as its ranks share it (node_verdict.h). The key
// is a hash of what the read depends on (the host and the sources' paths),
// FNV-1a, so it is short and the same in every process of the job.
#include "hw/node_verdict.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "util/text.h"

namespace gpudiag::hw {

NodeVerdict node_verdict(const HwEvidence& e, std::optional<std::uint64_t> since_usec) {
  NodeVerdict v;
  v.unfit = unfit_reason(e, since_usec);
  v.counts = finding_counts(e);
  v.unreadable = e.unreadable;
  if (v.unfit.size() > kMaxVerdictLine) v.unfit = v.unfit.substr(0, kMaxVerdictLine - 3) + "...";
  while (v.counts.size() > kMaxVerdictCounts) v.counts.erase(std::prev(v.counts.end()));
  if (v.unreadable.size() > kMaxVerdictUnreadable) v.unreadable.resize(kMaxVerdictUnreadable);
  for (auto& u : v.unreadable)
    if (u.size() > kMaxVerdictLine) u = u.substr(0, kMaxVerdictLine - 3) + "...";
  return v;
}

std::string encode_node_verdict(const NodeVerdict& v) {
  nlohmann::json j;
  j["unfit"] = clean_text(v.unfit);
  j["counts"] = nlohmann::json::object();
  for (const auto& [k, n] : v.counts) j["counts"][clean_text(k)] = n;
  j["unreadable"] = nlohmann::json::array();
  for (const auto& u : v.unreadable) j["unreadable"].push_back(clean_text(u));
  return j.dump();
}

std::optional<NodeVerdict> decode_node_verdict(const std::string& text) {
  if (text.size() > kMaxNodeReadText) return std::nullopt;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  const auto unfit = j.find("unfit");
  const auto counts = j.find("counts");
  const auto unreadable = j.find("unreadable");
  if (unfit == j.end() || !unfit->is_string() || counts == j.end() || !counts->is_object() ||
      unreadable == j.end() || !unreadable->is_array())
    return std::nullopt;
  NodeVerdict v;
  v.unfit = unfit->get<std::string>();
  if (v.unfit.size() > kMaxVerdictLine || !is_clean_text(v.unfit)) return std::nullopt;
  if (counts->size() > kMaxVerdictCounts || unreadable->size() > kMaxVerdictUnreadable)
    return std::nullopt;
  for (const auto& [k, n] : counts->items()) {
    if (k.size() > 64 || !is_clean_text(k) || !n.is_number_integer()) return std::nullopt;
    const auto count = n.get<long long>();
    if (count < 1 || count > 1000000) return std::nullopt;
    v.counts[k] = static_cast<int>(count);
  }
  for (const auto& u : *unreadable) {
    if (!u.is_string()) return std::nullopt;
    auto line = u.get<std::string>();
    if (line.size() > kMaxVerdictLine || !is_clean_text(line)) return std::nullopt;
    v.unreadable.push_back(std::move(line));
  }
  return v;
}

std::string node_read_key(const std::string& what, const std::string& host, const HwSources& s) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const std::string* part : {&host, &s.kmsg, &s.root}) {
    for (const unsigned char c : *part) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // a separator no path or host name holds
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return "hw/" + what + "/" + hex;
}

NodeVerdictRead read_node_verdict(Plane& plane, const std::string& key, NodeReader who,
                                  const std::function<NodeVerdict()>& read, Deadline deadline) {
  std::optional<NodeVerdict> mine;
  auto read_here = [&] {
    mine = read();
    return encode_node_verdict(*mine);
  };
  const auto got = plane.read_on_node(key, who, read_here, deadline);
  if (!mine) {
    if (auto v = decode_node_verdict(got.text)) {
      spdlog::debug("rank {} took the node's hardware evidence ({}) from the rank that read it",
                    plane.rank(), key);
      return {std::move(*v), false};
    }
    spdlog::warn("rank {}: the node's hardware evidence ({}) from another rank is not a verdict "
                 "gpudiag writes; reading it here",
                 plane.rank(), key);
    read_here();
  }
  spdlog::debug("rank {} read the node's hardware evidence ({})", plane.rank(), key);
  return {std::move(*mine), true};
}

}  // namespace gpudiag::hw
