// Reads `gpudiag-frames-stats/1` files (see stats_dump.h) into the frames
// model the detector replays, with the statistics the dumper computed.
#include "numerics/formats/stats_dump.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "numerics/scan/dtype.h"
#include "numerics/formats/mapped_file.h"
#include "numerics/formats/quote.h"
#include "util/text.h"
#include "util/error.h"

namespace gpudiag::numerics {

namespace {

using nlohmann::json;

/// A stats file is a few hundred bytes per tensor entry: 128 MiB holds some
/// 400,000 entries per batch, far beyond real models, and bounds the parsed
/// document's memory (a JSON tree takes several times the text).
constexpr std::size_t kMaxFileBytes = std::size_t{128} << 20;
constexpr int kMaxRank = 1 << 20;

/// A field of the file was wrong: names the file and the field.
[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw UsageError(path + ": not a valid " + std::string(kStatsFormat) + " file: " + what,
                   "write it with scripts/dump_activations.py (mode=\"stats\") and do not edit it");
}

std::uint64_t get_u64(const json& j, const char* key, const std::string& path,
                      const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !(it->is_number_unsigned() || (it->is_number_integer() && *it >= 0)))
    bad(path, where + ": '" + key + "' is not a non-negative integer");
  return it->get<std::uint64_t>();
}

std::string get_str(const json& j, const char* key, const std::string& path,
                    const std::string& where, std::size_t max = 4096) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > max)
    bad(path, where + ": '" + key + "' is not a string of at most " + std::to_string(max) +
                  " bytes");
  return it->get<std::string>();
}

/// abs_min/abs_max: a number >= 0, or "nan" / "inf".
double get_abs(const json& j, const char* key, const std::string& path, const std::string& where) {
  auto it = j.find(key);
  if (it != j.end() && it->is_number() && it->get<double>() >= 0) return it->get<double>();
  if (it != j.end() && it->is_string()) {
    if (*it == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (*it == "inf") return std::numeric_limits<double>::infinity();
  }
  bad(path, where + ": '" + key + "' is not a number >= 0, \"nan\" or \"inf\"");
}

TensorStats parse_stats(const json& j, std::uint64_t count, const std::string& path,
                        const std::string& where) {
  if (!j.is_object()) bad(path, where + ": 'stats' is not an object");
  TensorStats s;
  s.count = get_u64(j, "count", path, where);
  if (s.count != count)
    bad(path, where + ": 'count' " + std::to_string(s.count) + " is not the shape's " +
                  std::to_string(count) + " elements");
  s.abs_min = get_abs(j, "abs_min", path, where);
  s.abs_max = get_abs(j, "abs_max", path, where);
  std::uint64_t* counters[] = {&s.nan,  &s.pos_inf,   &s.neg_inf, &s.zero,
                               &s.subnormal, &s.ge_1e2, &s.ge_1e3, &s.ge_1e4};
  const char* names[] = {"nan", "pos_inf", "neg_inf", "zero", "subnormal", "ge_1e2", "ge_1e3",
                         "ge_1e4"};
  for (std::size_t k = 0; k < std::size(names); ++k) {
    *counters[k] = get_u64(j, names[k], path, where);
    if (*counters[k] > s.count) bad(path, where + ": '" + names[k] + "' exceeds the count");
  }
  const bool nan_values = std::isnan(s.abs_min) || std::isnan(s.abs_max);
  if ((s.nan > 0) != nan_values || (nan_values && !(std::isnan(s.abs_min) && std::isnan(s.abs_max))))
    bad(path, where + ": abs_min and abs_max are \"nan\" exactly when 'nan' is above 0");
  if (!nan_values && s.count > 0 && s.abs_min > s.abs_max)
    bad(path, where + ": abs_min is above abs_max");
  return s;
}

struct Parsed {
  std::string path;
  int rank = -1;
  std::uint64_t batch = 0;
  json doc;
};

Parsed parse_file(const std::string& path) {
  MappedFile file(path);
  const auto bytes = file.bytes();
  if (bytes.size() > kMaxFileBytes)
    bad(path, "it is " + std::to_string(bytes.size()) + " bytes, over the 128 MiB a stats file "
              "may be");
  Parsed p;
  p.path = path;
  // A key given twice in one object (two batch_number, say) would leave
  // the last one silently in force: refused, as safetensors headers are.
  std::vector<std::set<std::string>> keys;
  std::string twice;
  auto no_duplicates = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty() && twice.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      twice = parsed.get<std::string>();
    return true;
  };
  try {
    p.doc = json::parse(bytes.begin(), bytes.end(), no_duplicates);
  } catch (const json::exception& e) {
    bad(path, std::string("not JSON: ") + e.what());
  }
  if (!twice.empty()) bad(path, "it has the key " + quote(twice) + " twice in one object");
  if (!p.doc.is_object() || p.doc.value("format", json()) != kStatsFormat)
    bad(path, "its 'format' is not \"" + std::string(kStatsFormat) + "\"");
  p.batch = get_u64(p.doc, "batch_number", path, "the file");
  if (p.doc.contains("rank")) {
    const auto r = get_u64(p.doc, "rank", path, "the file");
    if (r >= static_cast<std::uint64_t>(kMaxRank)) bad(path, "'rank' is above 2^20");
    p.rank = static_cast<int>(r);
  }
  if (!p.doc.contains("frames") || !p.doc["frames"].is_array()) bad(path, "no 'frames' array");
  return p;
}

void build_batch(const Parsed& p, StatsDump& out) {
  Batch b;
  b.number = p.batch;
  std::vector<TensorStats> stats;
  const json& frames = p.doc["frames"];
  for (std::size_t f = 0; f < frames.size(); ++f) {
    const json& fr = frames[f];
    const std::string where = "frame " + std::to_string(f);
    if (!fr.is_object() || !fr.contains("entries") || !fr["entries"].is_array())
      bad(p.path, where + ": not an object with an 'entries' array");
    Frame frame;
    frame.index = f;
    frame.module = clean_text(get_str(fr, "module", p.path, where));  // util/text.h
    frame.class_name = clean_text(get_str(fr, "class", p.path, where, 512));
    if (auto t = fr.find("time"); t != fr.end() && t->is_number() && std::isfinite(t->get<double>()) &&
                                  t->get<double>() >= 0)
      frame.time = t->get<double>();
    for (std::size_t e = 0; e < fr["entries"].size(); ++e) {
      const json& en = fr["entries"][e];
      const std::string at = where + ", entry " + std::to_string(e);
      if (!en.is_object()) bad(p.path, at + ": not an object");
      Entry entry;
      entry.label = clean_text(get_str(en, "label", p.path, at, 512));  // a stranger's bytes
      const std::string kind = en.contains("kind") ? get_str(en, "kind", p.path, at, 32) : "tensor";
      if (kind == "None" || kind == "not a tensor") {
        entry.kind = kind == "None" ? EntryKind::none : EntryKind::not_a_tensor;
      } else if (kind == "tensor") {
        auto dtype = dtype_from_safetensors(get_str(en, "dtype", p.path, at, 16));
        if (!dtype) bad(p.path, at + ": 'dtype' is not a safetensors dtype name");
        if (!en.contains("shape") || !en["shape"].is_array() || en["shape"].size() > 64)
          bad(p.path, at + ": 'shape' is not an array of at most 64 sizes");
        TensorInfo info;
        info.dtype = *dtype;
        info.count = 1;
        for (const auto& d : en["shape"]) {
          if (!d.is_number_unsigned() && !(d.is_number_integer() && d >= 0))
            bad(p.path, at + ": 'shape' holds something that is not a size");
          const auto n = d.get<std::uint64_t>();
          if (n != 0 && info.count > (std::uint64_t{1} << 62) / n)
            bad(p.path, at + ": the shape's product overflows");
          info.count *= n;
          info.shape.push_back(n);
        }
        info.name = std::to_string(f) + "." + std::to_string(e) + "|" + frame.module + "|" +
                    frame.class_name + "|" + entry.label;
        stats.push_back(parse_stats(en.value("stats", json()), info.count, p.path, at));
        out.tensors.push_back(std::move(info));
        entry.slot = b.tensors.size();
        b.tensors.push_back(&out.tensors.back());
      } else {
        bad(p.path, at + ": 'kind' is not \"tensor\", \"None\" or \"not a tensor\"");
      }
      frame.entries.push_back(std::move(entry));
    }
    b.frames.push_back(std::move(frame));
  }
  out.batches.push_back(std::move(b));
  out.stats.push_back(std::move(stats));
}

}  // namespace

bool is_stats_path(const std::string& path) {
  static const std::string suffix = ".stats.json";
  return path.size() >= suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

StatsDump read_stats_dump(const std::vector<std::string>& files, int rank, bool all_ranks) {
  // One file at a time: its JSON tree is dropped once its batch is built.
  StatsDump all;
  std::vector<std::pair<int, std::string>> owner;  // per built batch: its rank and file
  for (const auto& f : files) {
    Parsed p = parse_file(f);
    if (std::find(all.ranks.begin(), all.ranks.end(), p.rank) == all.ranks.end())
      all.ranks.push_back(p.rank);
    if (rank >= 0 && p.rank != rank) continue;
    build_batch(p, all);
    owner.emplace_back(p.rank, p.path);
  }
  std::sort(all.ranks.begin(), all.ranks.end());
  if (rank < 0 && !all_ranks && all.ranks.size() > 1) {
    std::string list;
    for (int r : all.ranks)
      list += (list.empty() ? "" : ", ") + (r < 0 ? std::string("none") : std::to_string(r));
    throw UsageError("the stats files given hold the dumps of several ranks (" + list + ")",
                     "scan one rank at a time: add --rank N");
  }
  if (all.batches.empty())
    throw UsageError("no stats file of rank " + std::to_string(rank) + " among those given",
                     "check --rank against the rank in the file names");
  // Batches in rank, then number order; the tensors they point to stay where they are.
  std::vector<std::size_t> order(all.batches.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(owner[a].first, all.batches[a].number) <
           std::pair(owner[b].first, all.batches[b].number);
  });
  StatsDump out;
  out.ranks = all.ranks;
  out.tensors = std::move(all.tensors);  // a deque: the moved elements keep their addresses
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    if (k > 0 && all.batches[i].number == out.batches.back().number &&
        owner[i].first == out.batch_rank.back())
      throw UsageError(owner[i].second + " and " + owner[order[k - 1]].second + " both hold batch " +
                           std::to_string(all.batches[i].number),
                       "keep one stats file per batch (and rank)");
    out.batches.push_back(std::move(all.batches[i]));
    out.batch_rank.push_back(owner[i].first);
    out.stats.push_back(std::move(all.stats[i]));
  }
  return out;
}

}  // namespace gpudiag::numerics
