// The known checksums (known.h): the table checked field by field and bound
// by bound before any entry is used, the exact-key lookup, and the verdict.
#include "compute/known.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "compute/known_data.h"
#include "util/text.h"

namespace gpudiag {

namespace {

constexpr const char* kSchema = "gpudiag-compute-checksums/1";
constexpr int kMaxDepth = 8;

bool hex16(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

/// A short string of printable text, or throws naming the field.
std::string text_field(const nlohmann::json& e, const char* key, std::size_t max) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_string()) throw std::runtime_error(std::string("no string ") + key);
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > max || !is_clean_text(s) || s.find('\n') != std::string::npos)
    throw std::runtime_error(std::string(key) + " empty, longer than " + std::to_string(max) +
                             " characters or not plain text");
  return s;
}

KnownChecksums read_entry(const nlohmann::json& e, const nlohmann::json& sources) {
  if (!e.is_object()) throw std::runtime_error("not an object");
  KnownChecksums k;
  k.device = text_field(e, "device", 8);
  if (k.device != "gpu" && k.device != "host")
    throw std::runtime_error("device is neither gpu nor host");
  k.model = text_field(e, "model", 256);
  if (k.model == "*" && k.device != "host")
    throw std::runtime_error("model \"*\" is for the host only: a GPU's entry names its model");
  k.driver = text_field(e, "driver", 64);
  const auto kv = e.find("kernel");
  if (kv == e.end() || !kv->is_number_integer() || kv->get<long long>() < 1 ||
      kv->get<long long>() > 1000000)
    throw std::runtime_error("kernel is not a version number");
  k.kernel = static_cast<int>(kv->get<long long>());
  const auto cs = e.find("checksums");
  if (cs == e.end() || !cs->is_object() || cs->empty() || cs->size() > 8)
    throw std::runtime_error("checksums is not an object of 1 to 8 GEMMs");
  for (const auto& [part, sum] : cs->items()) {
    if (part != "bf16 GEMM" && part != "fp16 GEMM" && part != "fp32 GEMM")
      throw std::runtime_error("unknown GEMM \"" + clean_text(part.substr(0, 32)) + "\"");
    if (!sum.is_string() || !hex16(sum.get<std::string>()))
      throw std::runtime_error(part + ": not 16 lowercase hex digits");
    k.checksums.emplace_back(part, sum.get<std::string>());
  }
  const std::string source = text_field(e, "source", 64);
  if (!sources.contains(source))
    throw std::runtime_error("source \"" + source + "\" not in sources");
  return k;
}

bool same_key(const KnownChecksums& a, const KnownChecksums& b) {
  return a.device == b.device && a.model == b.model && a.driver == b.driver && a.kernel == b.kernel;
}

}  // namespace

KnownTable parse_known_checksums(std::string_view text) {
  const std::string where = "data/compute-checksums.json: ";
  const std::string refused = "; no known checksums are used";
  if (text.size() > kMaxKnownBytes)
    return {{}, where + "larger than " + std::to_string(kMaxKnownBytes) + " bytes" + refused};
  if (json_nesting(text) > kMaxDepth) return {{}, where + "nested too deep" + refused};
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {{}, where + "not a JSON object" + refused};
  if (!j.contains("schema") || j["schema"] != kSchema)
    return {{}, where + "schema is not " + kSchema + refused};
  const auto entries = j.find("entries");
  const auto sources = j.find("sources");
  if (entries == j.end() || !entries->is_array() || sources == j.end() || !sources->is_object())
    return {{}, where + "no entries array or no sources object" + refused};
  if (entries->size() > kMaxKnownEntries)
    return {{}, where + "more than " + std::to_string(kMaxKnownEntries) + " entries" + refused};
  KnownTable t;
  for (std::size_t i = 0; i < entries->size(); ++i) {
    try {
      auto k = read_entry((*entries)[i], *sources);
      for (const auto& o : t.entries)
        if (same_key(o, k)) throw std::runtime_error("its key is listed twice");
      t.entries.push_back(std::move(k));
    } catch (const std::exception& e) {
      return {{}, where + "entry " + std::to_string(i) + ": " + e.what() + refused};
    }
  }
  return t;
}

const KnownTable& known_checksums() {
  static const KnownTable table = [] {
    KnownTable t;
    for (std::size_t i = 0; i < kKnownChecksumFiles_count; ++i)
      if (kKnownChecksumFiles[i].text) t = parse_known_checksums(kKnownChecksumFiles[i].text);
    return t;
  }();
  return table;
}

const KnownChecksums* find_known(const KnownTable& t, const ComputeRecord& r) {
  if (r.kernel <= 0 || r.model.empty()) return nullptr;
  for (const auto& e : t.entries) {
    if (e.device != r.device || e.kernel != r.kernel) continue;
    if (e.model != r.model && !(e.model == "*" && e.device == "host")) continue;
    if (e.driver != "*" && (r.driver.empty() || e.driver != r.driver)) continue;
    return &e;
  }
  return nullptr;
}

void judge_known(const KnownTable& t, const ComputeTallies& tallies, ComputeRecord& mine) {
  if (!mine.ran() || mine.judged == "unstable") return;
  const KnownChecksums* e = find_known(t, mine);
  if (!e) return;
  const ComputePart* bad = nullptr;
  std::string known_sum;
  int judged_parts = 0;
  for (const auto& p : mine.parts)
    for (const auto& [part, sum] : e->checksums)
      if (part == p.name) {
        ++judged_parts;
        if (!bad && p.checksum != sum) bad = &p, known_sum = sum;
      }
  if (judged_parts == 0) return;  // an entry for none of the GEMMs this rank ran
  if (!bad) {
    mine.known = "matches";
    mine.judged = "agrees";  // the reference for this key, whatever the peers gave
    mine.finding.clear();
    return;
  }
  const std::string unit = mine.device == "gpu" ? "GPUs" : "ranks";
  std::string f = "compute result differs from the known checksum of " + mine.model + " (" +
                  (mine.device == "gpu" ? "driver " + mine.driver : std::string("host backend")) +
                  ", kernel v" + std::to_string(mine.kernel) + ") (" + bad->name + ", checksum " +
                  bad->checksum + ", known " + known_sum + ")";
  for (const auto& tally : tallies) {
    if (tally.model != mine.model || tally.part != bad->name || tally.total() < 2) continue;
    int known = 0, same = 0;
    for (const auto& [c, n] : tally.checksums) {
      if (c == known_sum) known = n;
      if (c == bad->checksum) same = n;
    }
    const int n = tally.total();
    if (known > 0)
      f += "; " + std::to_string(known) + " of " + std::to_string(n) + " " + unit +
           " of its model give the known one";
    else if (same == n)
      f += "; all " + std::to_string(n) + " " + unit +
           " of its model give this same checksum: either the "
           "known entry is wrong for this setup or every one of them computes wrong; re-derive the "
           "entry from a known-good GPU (docs/check.md, \"The known checksums\")";
  }
  mine.known = "differs";
  mine.judged = "differs";
  mine.finding = std::move(f);
}

std::string nvidia_driver_release(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string line(512, '\0');
  in.getline(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  std::smatch m;
  if (std::regex_search(line, m, std::regex(R"(\b(\d{3,4}\.\d{1,4}(\.\d{1,4})?)\b)"))) return m[1];
  return "";
}

}  // namespace gpudiag
