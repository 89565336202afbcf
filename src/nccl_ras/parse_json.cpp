// parse_json() (report.h): RAS's JSON document (NCCL 2.28.7 and later), with the groups the
// text form prints derived from it by NCCL's own rules.
//
// The layout is client_support.cc rasDumpCommsToJSON's: nccl_version, cuda_*_version,
// timestamp, communicators_count, communicators[] (hash, secondary_hash, size, ranks_count,
// missing_ranks_count, ranks[] with rank, host, pid, cuda_dev, nvml_dev, status {init_state,
// async_error, finalize_called, destroy_flag, abort_flag}, collective_counts {Broadcast,
// Reduce, AllGather, ReduceScatter, AllReduce}; missing_ranks[] with rank, host, pid,
// cuda_dev, nvml_dev, status {unresponsive, considered_dead}), ras {collection_time_sec,
// timeouts_count}. NCCL 2.28.7 and 2.28.9 leave out the comma after a missing rank's
// nvml_dev (fixed in 2.29.2): such a document is repaired, and the report says so.
// The rules (rasClientRunComms): a rank's state is ABORT if abort_flag, else FINALIZE if
// finalize_called or destroy_flag, else RUNNING if init_state is 0, else INIT; a missing
// rank whose process answered is NOCOMM; an init_state or async_error other than 0
// (ncclSuccess) and 7 (ncclInProgress) is an error; counts that differ are a mismatch.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "nccl_ras/report.h"
#include "util/text.h"

namespace gpudiag::ras {

namespace {

using nlohmann::json;

/// RAS's document nests 5 levels; anything far deeper is not RAS (and is refused before
/// a parser recurses into it).
constexpr int kMaxDepth = 12;

void check_depth(std::string_view s) {
  if (json_nesting(s) > kMaxDepth)
    throw ParseError("RAS's JSON nests deeper than " + std::to_string(kMaxDepth) + " levels");
}

/// 2.28's missing comma: `"nvml_dev": 3` followed by a key on the next line.
std::string add_missing_commas(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 64);
  const std::string_view key = "\"nvml_dev\": ";
  std::size_t at = 0;
  while (true) {
    auto k = s.find(key, at);
    if (k == std::string_view::npos) break;
    auto end = k + key.size();
    if (end < s.size() && s[end] == '-') ++end;
    while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
    auto next = s.find_first_not_of(" \t\r\n", end);
    out.append(s.substr(at, end - at));
    if (next != std::string_view::npos && s[next] == '"') out += ',';
    at = end;
  }
  out.append(s.substr(at));
  return out;
}

const json& field(const json& obj, const char* name, json::value_t type, const std::string& where) {
  auto it = obj.find(name);
  auto same = [&](const json& v) {
    if (type == json::value_t::number_integer) return v.is_number_integer();
    if (type == json::value_t::number_float) return v.is_number();
    return v.type() == type;
  };
  if (it == obj.end() || !same(*it))
    throw ParseError("RAS's JSON: " + where + "." + name + " is missing or not " +
                     (type == json::value_t::string    ? "a string"
                      : type == json::value_t::array   ? "a list"
                      : type == json::value_t::object  ? "an object"
                      : type == json::value_t::boolean ? "true or false"
                                                       : "a number"));
  return *it;
}

long long integer(const json& obj, const char* name, const std::string& where) {
  const auto& v = field(obj, name, json::value_t::number_integer, where);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw ParseError("RAS's JSON: " + where + "." + name + " is out of range");
  return v.get<long long>();
}

/// "0x5a1e4c0ffee12345" -> "5a1e4c0ffee12345", as the text prints it (%016lx).
std::string comm_hash(const std::string& h, const std::string& where) {
  std::string hex = h.starts_with("0x") ? h.substr(2) : h;
  if (hex.empty() || hex.size() > 16 || !std::all_of(hex.begin(), hex.end(), [](char c) {
        return std::isxdigit(static_cast<unsigned char>(c));
      }))
    throw ParseError("RAS's JSON: " + where + ".hash is not a hexadecimal hash");
  std::transform(hex.begin(), hex.end(), hex.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return std::string(16 - hex.size(), '0') + hex;
}

/// src/ras/client_support.cc ncclErrorToString.
std::string error_text(long long code) {
  switch (code) {
    case 1:
      return "Unhandled CUDA error";
    case 2:
      return "System error";
    case 3:
      return "Internal error";
    case 4:
      return "Invalid argument";
    case 5:
      return "Invalid usage";
    case 6:
      return "Remote process error";
    default:
      return "Unexpected error";
  }
}

/// Groups, the most ranks first, then the larger value (rasValCountsCompareRev).
template <class Key>
std::vector<ValueGroup> grouped(const std::vector<std::pair<Key, RankRef>>& items,
                                std::string (*name)(const Key&)) {
  std::map<Key, std::vector<RankRef>> by;
  for (const auto& [k, r] : items) by[k].push_back(r);
  std::vector<std::pair<Key, std::vector<RankRef>>> sorted(by.begin(), by.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.size() != b.second.size() ? a.second.size() > b.second.size()
                                              : b.first < a.first;
  });
  std::vector<ValueGroup> out;
  for (auto& [k, ranks] : sorted) {
    std::sort(ranks.begin(), ranks.end(),
              [](const RankRef& a, const RankRef& b) { return a.rank < b.rank; });
    out.push_back({name(k), static_cast<long long>(ranks.size()), std::move(ranks)});
  }
  return out;
}

std::string count_name(const std::uint64_t& v) { return std::to_string(v); }
std::string state_name(const std::string& v) { return v; }

struct Job {
  Report r;
  std::set<std::pair<std::string, long long>> processes, dead, unresponsive;
  std::set<std::string> hosts;

  void add_process(const ProcessRef& p, bool is_dead, bool silent) {
    if (processes.insert({p.host, p.pid}).second) r.seen.push_back(p);
    hosts.insert(p.host);
    auto& set = is_dead ? dead : unresponsive;
    if ((is_dead || silent) && set.insert({p.host, p.pid}).second)
      (is_dead ? r.dead : r.unresponsive).push_back(p);
  }

  RankRef rank_of(const json& j, const std::string& where) {
    RankRef r;
    r.rank = integer(j, "rank", where);
    r.process.host = field(j, "host", json::value_t::string, where).get<std::string>();
    r.process.pid = integer(j, "pid", where);
    r.process.gpus = std::to_string(integer(j, "cuda_dev", where));
    if (auto nvml = integer(j, "nvml_dev", where); std::to_string(nvml) != r.process.gpus)
      r.process.gpus += " (NVML " + std::to_string(nvml) + ")";
    return r;
  }

  void comm(const json& c, const std::string& where) {
    const std::string hash =
        comm_hash(field(c, "hash", json::value_t::string, where).get<std::string>(), where);
    const long long size = integer(c, "size", where);
    std::vector<std::pair<std::string, RankRef>> states;
    std::map<std::string, std::vector<std::pair<std::uint64_t, RankRef>>> counts;
    std::vector<std::string> ops;  // in the document's order
    std::map<std::pair<std::string, long long>, std::vector<RankRef>> errs;
    const auto& ranks = field(c, "ranks", json::value_t::array, where);
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const std::string at = where + ".ranks[" + std::to_string(i) + "]";
      if (!ranks[i].is_object()) throw ParseError("RAS's JSON: " + at + " is not an object");
      RankRef rank = rank_of(ranks[i], at);
      add_process(rank.process, false, false);
      const auto& st = field(ranks[i], "status", json::value_t::object, at);
      const long long init = integer(st, "init_state", at + ".status");
      const long long async = integer(st, "async_error", at + ".status");
      auto flag = [&](const char* n) {
        return field(st, n, json::value_t::boolean, at + ".status").get<bool>();
      };
      states.push_back({flag("abort_flag")                                ? "ABORT"
                        : flag("finalize_called") || flag("destroy_flag") ? "FINALIZE"
                        : init == 0                                       ? "RUNNING"
                                                                          : "INIT",
                        rank});
      if (init != 0 && init != 7) errs[{"initialization", init}].push_back(rank);
      if (async != 0 && async != 7) errs[{"asynchronous", async}].push_back(rank);
      for (const auto& [op, v] :
           field(ranks[i], "collective_counts", json::value_t::object, at).items()) {
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<long long>() >= 0))
          throw ParseError("RAS's JSON: " + at + ".collective_counts." + op + " is not a count");
        if (!counts.contains(op)) ops.push_back(op);
        counts[op].push_back({v.get<std::uint64_t>(), rank});
      }
    }
    MissingRanks silent{hash, 0, {}};
    const auto& missing = field(c, "missing_ranks", json::value_t::array, where);
    for (std::size_t i = 0; i < missing.size(); ++i) {
      const std::string at = where + ".missing_ranks[" + std::to_string(i) + "]";
      if (!missing[i].is_object()) throw ParseError("RAS's JSON: " + at + " is not an object");
      RankRef rank = rank_of(missing[i], at);
      const auto& st = field(missing[i], "status", json::value_t::object, at);
      const bool gone =
          field(st, "unresponsive", json::value_t::boolean, at + ".status").get<bool>();
      const bool is_dead =
          field(st, "considered_dead", json::value_t::boolean, at + ".status").get<bool>();
      add_process(rank.process, is_dead, gone && !is_dead);
      if (gone || is_dead) {
        ++silent.count;
        silent.ranks.push_back(rank);
      } else {
        states.push_back({"NOCOMM", rank});
      }
    }
    if (silent.count > 0) r.missing.push_back(std::move(silent));
    std::set<std::string> seen_states;
    for (const auto& s : states) seen_states.insert(s.first);
    if (seen_states.size() > 1)
      r.mismatches.push_back(
          {hash, size, "status", grouped(states, state_name), Motion::unknown, {}, {}});
    for (const auto& op : ops) {
      std::set<std::uint64_t> seen;
      for (const auto& v : counts[op]) seen.insert(v.first);
      if (seen.size() > 1)
        r.mismatches.push_back(
            {hash, size, op, grouped(counts[op], count_name), Motion::unknown, {}, {}});
    }
    std::vector<RankError> found;
    for (auto& [key, ranks_with] : errs)
      found.push_back({hash, key.first, error_text(key.second),
                       static_cast<long long>(ranks_with.size()), std::move(ranks_with)});
    std::stable_sort(found.begin(), found.end(), [](const RankError& a, const RankError& b) {
      return a.phase != b.phase ? a.phase > b.phase : a.count > b.count;  // initialization first
    });
    for (auto& e : found) r.errors.push_back(std::move(e));
  }
};

}  // namespace

Report parse_json(std::string_view reply) {
  check_depth(reply);
  Job job;
  json doc = json::parse(reply, nullptr, false);
  if (doc.is_discarded()) {
    doc = json::parse(add_missing_commas(reply), nullptr, false);
    if (doc.is_discarded())
      throw ParseError(reply.find('{') == std::string_view::npos
                           ? "RAS's reply is not JSON"
                           : "RAS's JSON does not parse (cut short, or not RAS's document)");
    job.r.notes.push_back(
        "the JSON lacked the comma after a missing rank's nvml_dev (NCCL 2.28.7 "
        "and 2.28.9 print it so) and was read with it added");
  }
  if (!doc.is_object()) throw ParseError("RAS's JSON is not an object");
  Report& r = job.r;
  r.format = "json";
  r.nccl_version = field(doc, "nccl_version", json::value_t::string, "document").get<std::string>();
  const auto& comms = field(doc, "communicators", json::value_t::array, "document");
  r.communicators = static_cast<long long>(comms.size());
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const std::string at = "communicators[" + std::to_string(i) + "]";
    if (!comms[i].is_object()) throw ParseError("RAS's JSON: " + at + " is not an object");
    job.comm(comms[i], at);
  }
  if (auto it = doc.find("ras"); it != doc.end() && it->is_object()) {
    if (auto t = it->find("timeouts_count"); t != it->end() && t->is_number_integer())
      r.timeouts = t->get<long long>();
    if (auto t = it->find("collection_time_sec"); t != it->end() && t->is_number())
      r.collection_s = t->get<double>();
  }
  r.processes = static_cast<long long>(job.processes.size());
  r.nodes = static_cast<long long>(job.hosts.size());
  r.dead_count = static_cast<long long>(job.dead.size());
  r.unresponsive_count = static_cast<long long>(job.unresponsive.size());
  return std::move(job.r);
}

}  // namespace gpudiag::ras
