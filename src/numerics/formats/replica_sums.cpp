// Reading `gpudiag-replica-sums/2` (and /1) files (replica_sums.h), one line at a time
// from the file's mapping.
#include "numerics/formats/replica_sums.h"

#include <nlohmann/json.hpp>

#include "numerics/formats/mapped_file.h"
#include "numerics/formats/quote.h"
#include "numerics/scan/checksum.h"
#include "util/error.h"
#include "util/text.h"

namespace gpudiag::numerics {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxLine = std::size_t{64} << 20;
constexpr std::size_t kMaxTensors = std::size_t{1} << 22;

[[noreturn]] void bad(const std::string& path, std::size_t line, const std::string& what) {
  throw UsageError(path + ":" + std::to_string(line) + ": not a valid " +
                       std::string(kReplicaFormat) + " line: " + what,
                   "write it with ReplicaCheck (scripts/replica_check.py) and do not edit it");
}

/// Calls f(line_number, text) for each complete line of the file.
template <class F>
void for_each_line(const MappedFile& file, F&& f) {
  const Bytes b = file.bytes();
  std::size_t at = 0, number = 0;
  while (at < b.size()) {
    std::size_t end = at;
    while (end < b.size() && b[end] != '\n') ++end;
    if (end == b.size()) return;  // no newline yet: a line being written
    ++number;
    if (end - at > kMaxLine) bad(file.path(), number, "longer than 64 MiB");
    if (end > at)
      f(number, std::string_view(reinterpret_cast<const char*>(b.data() + at), end - at));
    at = end + 1;
  }
}

json parse_line(const std::string& path, std::size_t n, std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) bad(path, n, "not a JSON object");
  return j;
}

std::vector<std::uint64_t> parse_sums(const json& j, std::size_t expected, const std::string& path,
                                      std::size_t n) {
  const auto it = j.find("sums");
  if (it == j.end() || !it->is_array() || it->size() != expected)
    bad(path, n, "'sums' is not an array of " + std::to_string(expected) + " checksums");
  std::vector<std::uint64_t> out;
  out.reserve(expected);
  for (const auto& s : *it) {
    if (!s.is_string() || s.get_ref<const std::string&>().size() != 16)
      bad(path, n, "a checksum is not 16 hex digits");
    std::uint64_t v = 0;
    for (char c : s.get_ref<const std::string&>()) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) bad(path, n, "a checksum is not 16 lowercase hex digits");
      v = v << 4 | static_cast<std::uint64_t>(d);
    }
    out.push_back(v);
  }
  return out;
}

std::uint64_t get_step(const json& j, const std::string& path, std::size_t n) {
  const auto it = j.find("step");
  if (it == j.end() || !(it->is_number_unsigned() || (it->is_number_integer() && *it >= 0)))
    bad(path, n, "'step' is not a non-negative integer");
  return it->get<std::uint64_t>();
}

void read_header(const json& j, ReplicaFile& f, std::size_t n) {
  const auto format = j.value("format", json());
  if (format != kReplicaFormat && format != kReplicaFormatV1)
    bad(f.path, n, "the first line's 'format' is not \"" + std::string(kReplicaFormat) + "\"");
  if (n > 1 && format.get<std::string>() != f.format)
    bad(f.path, n, "a later header (a restart) names another format than the first: checksums of "
                   "two versions cannot be compared");
  f.format = format.get<std::string>();
  const auto rank = j.value("rank", json());
  int r = -1;
  if (!rank.is_null()) {
    if (!rank.is_number_integer() || rank < 0 || rank >= (1 << 20))
      bad(f.path, n, "'rank' is not a rank");
    r = rank.get<int>();
  }
  std::vector<int> group;
  const auto g = j.value("group", json());
  if (!g.is_null()) {
    if (!g.is_array() || g.size() > (1u << 20)) bad(f.path, n, "'group' is not an array of ranks");
    for (const auto& x : g) {
      if (!x.is_number_integer() || x < 0 || x >= (1 << 20))
        bad(f.path, n, "'group' holds something not a rank");
      group.push_back(x.get<int>());
    }
  }
  const auto t = j.value("tensors", json());
  if (!t.is_array() || t.size() > kMaxTensors) bad(f.path, n, "'tensors' is not an array");
  std::vector<std::string> names;
  for (const auto& x : t) {
    if (!x.is_object() || !x.contains("name") || !x["name"].is_string())
      bad(f.path, n, "a tensor has no 'name'");
    names.push_back(clean_text(x["name"].get<std::string>()).substr(0, 512));  // printed later
  }
  if (n > 1 && (names != f.names || r != f.rank || group != f.group))
    bad(f.path, n, "a later header (a restart) names other tensors, rank or group than the first");
  f.rank = r, f.group = std::move(group), f.names = std::move(names);
}

}  // namespace

bool is_replica_path(const std::string& path) {
  static const std::string suffix = "replica.jsonl";
  return path.size() >= suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

ReplicaFile index_replica_file(const std::string& path) {
  const MappedFile file(path);
  ReplicaFile f;
  f.path = path;
  bool header = false;
  for_each_line(file, [&](std::size_t n, std::string_view text) {
    const json j = parse_line(path, n, text);
    if (j.contains("format")) {
      read_header(j, f, header ? n : 1);
      header = true;
      return;
    }
    if (!header) bad(path, n, "a step before the header");
    const auto sums = parse_sums(j, f.names.size(), path, n);
    f.digests[get_step(j, path, n)] = checksum_of(sums.data(), sums.size() * sizeof(std::uint64_t));
  });
  if (!header)
    throw UsageError(path + ": no " + std::string(kReplicaFormat) + " header line",
                     "write it with ReplicaCheck (scripts/replica_check.py)");
  return f;
}

std::optional<std::vector<std::uint64_t>> replica_row(const ReplicaFile& f, std::uint64_t step) {
  const MappedFile file(f.path);
  std::optional<std::vector<std::uint64_t>> row;
  for_each_line(file, [&](std::size_t n, std::string_view text) {
    if (text.find("\"step\"") == std::string_view::npos) return;
    const json j = parse_line(f.path, n, text);
    if (!j.contains("format") && get_step(j, f.path, n) == step)
      row = parse_sums(j, f.names.size(), f.path, n);
  });
  return row;
}

}  // namespace gpudiag::numerics
