// read_dump (dump.h): torch's dump layout, typed. Every field is read defensively: a value
// of another type than torch writes is treated as absent, never as an error of gpudiag.
//
// A pickle can share one value among all entries through its memo, at the cost of one value
// a reference for a str whatever its size: so a str is cut where it is read (a name of 1 MB
// shared by 4,000 entries is never copied 4,000 times), a number longer than any int64 is not
// parsed, and a ranks str is parsed once however many groups share it.
#include "flight_recorder/dump.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <variant>

namespace gpudiag::fr {

namespace {

std::optional<std::int64_t> as_int(const Value* v) {
  if (!v) return std::nullopt;
  if (v->kind == Value::Kind::integer) return v->i;
  if (v->kind == Value::Kind::boolean) return v->b ? 1 : 0;
  if (v->kind == Value::Kind::text && v->str().size() <= 20) {  // dump_json: pg_status as strs
    std::int64_t out = 0;
    auto s = v->str();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && p == s.data() + s.size()) return out;
  }
  return std::nullopt;
}

/// A str's first `max` bytes, empty for another type.
std::string as_text(const Value* v, std::size_t max) {
  return v && v->kind == Value::Kind::text ? std::string(v->str().substr(0, max)) : std::string();
}

std::string_view as_view(const Value* v) {
  return v && v->kind == Value::Kind::text ? v->str() : std::string_view();
}

/// "[0, 1, 2, 3]" (ranks_str in TraceUtils.h; the analyser reads it with ast.literal_eval,
/// builder.py build_groups_memberships) or a list of ints; ranks outside 0..2^31-1 dropped.
/// Refuses a list of more than kMaxGroupRanks ranks as soon as it finds one more.
std::vector<int> parse_ranks(const Value* v, std::string_view group) {
  std::vector<int> out;
  auto keep = [&](std::int64_t r) {
    if (r < 0 || r > std::numeric_limits<int>::max()) return;
    if (out.size() == kMaxGroupRanks)
      throw FormatError("pg_config lists more than " + std::to_string(kMaxGroupRanks) +
                        " ranks in group " + std::string(group.substr(0, 64)) +
                        ": the limit of one group");
    out.push_back(static_cast<int>(r));
  };
  if (!v) return out;
  if (v->is_list_like()) {
    for (const auto& item : v->items())
      if (auto r = as_int(&item)) keep(*r);
  } else if (v->is_text()) {
    auto s = v->str();
    for (std::size_t k = 0; k < s.size();) {
      if (s[k] < '0' || s[k] > '9') {
        ++k;
        continue;
      }
      std::int64_t r = 0;
      auto [p, ec] = std::from_chars(s.data() + k, s.data() + s.size(), r);
      if (ec == std::errc()) keep(r);
      k = static_cast<std::size_t>(p - s.data());
      if (ec != std::errc()) ++k;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// pg_config's member lists: a str shared by many groups (through a pickle's memo) is parsed
/// once, and every group's ranks count against kMaxDumpRanks.
class RankLists {
 public:
  std::vector<int> read(const Value* v, std::string_view group) {
    std::vector<int> out;
    if (v && v->is_text()) {
      auto it = parsed_.find(v->shared_id());
      if (it == parsed_.end()) it = parsed_.emplace(v->shared_id(), parse_ranks(v, group)).first;
      out = it->second;
    } else {
      out = parse_ranks(v, group);
    }
    total_ += out.size();
    if (total_ > kMaxDumpRanks)
      throw FormatError("pg_config lists more than " + std::to_string(kMaxDumpRanks) +
                        " ranks in all its groups: the limit of one dump");
    return out;
  }

 private:
  std::map<const void*, std::vector<int>> parsed_;
  std::size_t total_ = 0;
};

void read_sizes(const Value* v, std::vector<std::vector<std::int64_t>>& out, bool& cut) {
  if (!v || !v->is_list_like()) return;
  for (const auto& t : v->items()) {
    if (out.size() == Op::kMaxTensors) {
      cut = true;
      return;
    }
    auto& dims = out.emplace_back();
    for (const auto& d : t.items()) {
      if (dims.size() == Op::kMaxDims) {
        cut = true;
        break;
      }
      dims.push_back(as_int(&d).value_or(-1));
    }
  }
}

void read_dtypes(const Value* v, std::vector<std::string>& out, bool& cut) {
  if (!v || !v->is_list_like()) return;
  for (const auto& t : v->items()) {
    if (out.size() == Op::kMaxTensors) {
      cut = true;
      return;
    }
    out.push_back(as_text(&t, 64));
  }
}

std::optional<State> parse_state(std::string_view s) {
  if (s == "scheduled") return State::scheduled;
  if (s == "started") return State::started;
  if (s == "completed") return State::completed;
  return std::nullopt;
}

/// One entry, or the name of what it lacks.
std::variant<Entry, std::string> read_entry(const Value& e) {
  if (!e.is_dict()) return std::string("not a dict");
  Entry out;
  if (const Value* pg = e.get("process_group"); pg && pg->is_list_like() && !pg->items().empty()) {
    out.group = as_text(&pg->items()[0], kMaxNameBytes);
    if (pg->items().size() > 1) out.group_desc = as_text(&pg->items()[1], kMaxNameBytes);
  }
  out.pg_id = as_int(e.get("pg_id")).value_or(-1);
  if (out.group.empty()) {  // 1.x: no process_group; the pg_id names the group
    if (out.pg_id < 0) return std::string("no process_group");
    out.group = std::to_string(out.pg_id);
  }
  auto seq = as_int(e.get("collective_seq_id"));
  if (!seq) seq = as_int(e.get("seq_id"));  // 1.x
  if (!seq) return std::string("no collective_seq_id");
  out.seq = *seq;
  out.op.name = as_text(e.get("profiling_name"), 200);
  if (out.op.name.empty()) return std::string("no profiling_name");
  auto state = parse_state(as_view(e.get("state")));
  if (!state) return std::string("no state");
  out.state = *state;
  out.record_id = as_int(e.get("record_id")).value_or(-1);
  out.p2p_seq = as_int(e.get("p2p_seq_id")).value_or(-1);
  if (const Value* p = e.get("is_p2p"); p && p->kind == Value::Kind::boolean) {
    out.p2p = p->b;
  } else {  // before is_p2p: "nccl:send 1->2", "nccl:recv 3<-0" (types.py, Op)
    out.p2p = out.op.name.find(":send") != std::string::npos ||
              out.op.name.find(":recv") != std::string::npos;
  }
  out.start_recorded =
      as_int(e.get("time_discovered_started_ns")).value_or(0) > 0 || out.state == State::started;
  read_sizes(e.get("input_sizes"), out.op.in_sizes, out.op.cut);
  read_sizes(e.get("output_sizes"), out.op.out_sizes, out.op.cut);
  read_dtypes(e.get("input_dtypes"), out.op.in_dtypes, out.op.cut);
  read_dtypes(e.get("output_dtypes"), out.op.out_dtypes, out.op.cut);
  return out;
}

}  // namespace

const char* state_name(State s) {
  switch (s) {
    case State::not_scheduled:
      return "not_scheduled";
    case State::scheduled:
      return "scheduled";
    case State::started:
      return "started";
    case State::completed:
      return "completed";
  }
  return "?";
}

bool known_version(std::string_view v) {
  for (int minor = 0; minor <= 10; ++minor)
    if (v == "2." + std::to_string(minor)) return true;
  return false;
}

RankDump read_dump(const Value& root, int rank, std::string path, std::string format) {
  if (!root.is_dict())
    throw FormatError(std::string("it holds a ") + root.type_name() +
                      ", not the dict of a flight-recorder dump");
  const Value* entries = root.get("entries");
  const Value* version = root.get("version");
  const Value* config = root.get("pg_config");
  if (!entries && !version && !config)
    throw FormatError(
        "a dict without the keys of a flight-recorder dump (version, pg_config, "
        "entries)");
  RankDump d;
  d.rank = rank;
  d.path = std::move(path);
  d.format = std::move(format);
  d.version = as_text(version, 32);
  if (d.version.empty())
    d.notes.push_back("no version string: read as the 2.x layout");
  else if (!known_version(d.version))
    d.notes.push_back("version " + d.version +
                      " is not one gpudiag knows (2.0 to 2.10): read as the 2.x layout");
  if (config && config->is_dict()) {
    RankLists lists;
    const auto& kv = config->items();
    for (std::size_t k = 0; k + 1 < kv.size(); k += 2) {
      if (!kv[k].is_text()) continue;
      GroupConfig g;
      g.desc = as_text(kv[k + 1].get("desc"), kMaxNameBytes);
      g.ranks = lists.read(kv[k + 1].get("ranks"), kv[k].str());
      d.groups[as_text(&kv[k], kMaxNameBytes)] = std::move(g);
    }
  }
  if (const Value* status = root.get("pg_status"); status && status->is_dict()) {
    const auto& kv = status->items();
    for (std::size_t k = 0; k + 1 < kv.size(); k += 2) {
      auto id = as_int(&kv[k]);
      if (!id) continue;
      GroupStatus s;
      s.enqueued = as_int(kv[k + 1].get("last_enqueued_collective")).value_or(-1);
      s.started = as_int(kv[k + 1].get("last_started_collective")).value_or(-1);
      s.completed = as_int(kv[k + 1].get("last_completed_collective")).value_or(-1);
      d.status[*id] = s;
    }
  }
  std::map<std::string, std::size_t> skipped;
  if (entries && entries->is_list_like()) {
    for (const auto& e : entries->items()) {
      auto r = read_entry(e);
      if (auto* entry = std::get_if<Entry>(&r))
        d.entries.push_back(std::move(*entry));
      else
        ++skipped[std::get<std::string>(r)];
    }
  } else if (entries) {
    d.notes.push_back(std::string("entries is a ") + entries->type_name() + ", not a list");
  }
  for (const auto& [why, n] : skipped)
    d.notes.push_back(std::to_string(n) + " entries skipped: " + why);
  return d;
}

}  // namespace gpudiag::fr
