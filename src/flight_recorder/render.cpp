// render_text and render_json (render.h).
#include "flight_recorder/render.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::fr {

namespace {

using ojson = nlohmann::ordered_json;

std::string ranks_or_none(const std::vector<int>& r) { return r.empty() ? "none" : rank_list(r); }

std::string ranks_who(const std::vector<int>& r) {
  return (r.size() == 1 ? "rank " : "ranks ") + rank_list(r);
}

/// "waiting: ranks 4,6 wait in group 2 [0,2,4,6] (mesh_dp) at seq 9 ... for rank 5", one
/// line per place and the ranks waited for.
std::string waiting_text(const Report& rep) {
  std::map<std::tuple<std::string, std::vector<int>, std::int64_t, std::vector<int>,
                      std::vector<int>>,
           std::pair<std::vector<int>, const Wait*>>
      by;
  for (const auto& w : rep.waits) {
    auto& e = by[{w.group + (w.p2p ? " p2p" : ""), w.group_ranks, w.seq, w.for_ranks,
                  w.for_no_dump}];
    e.first.push_back(w.rank);
    e.second = &w;
  }
  std::vector<std::pair<int, std::string>> lines;  // by first waiting rank
  for (const auto& [k, v] : by) {
    const Wait& w = *v.second;
    bool shared = false;
    for (const auto& g : rep.groups) shared = shared || (g.name == w.group && g.shared_name);
    std::string line = "waiting: " + ranks_who(v.first) + (v.first.size() == 1 ? " waits" : " wait") +
                       " in " + clean_text(group_label(w.group, w.group_desc, w.group_ranks, shared)) +
                       " at " + (w.p2p ? "p2p " : "") + clean_text(describe(w.seq, w.op)) +
                       " for ";
    std::vector<std::string> parts;
    if (!w.for_ranks.empty()) parts.push_back(ranks_who(w.for_ranks));
    if (!w.for_no_dump.empty()) parts.push_back(ranks_who(w.for_no_dump) + " (no dump)");
    lines.emplace_back(v.first.front(), line + join(parts, " and ") + "\n");
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l.second;
  return out;
}

ojson op_json(std::int64_t seq, const Op& op) {
  ojson j = ojson::object();
  j["seq"] = seq >= 0 ? ojson(seq) : ojson(nullptr);
  if (!op.known()) {
    j["op"] = nullptr;
    return j;
  }
  auto texts = [](const std::vector<std::string>& v) {
    ojson a = ojson::array();
    for (const auto& s : v) a.push_back(clean_text(s));
    return a;
  };
  j["op"] = clean_text(op.name);
  j["input_sizes"] = op.in_sizes;
  j["input_dtypes"] = texts(op.in_dtypes);
  j["output_sizes"] = op.out_sizes;
  j["output_dtypes"] = texts(op.out_dtypes);
  j["cut"] = op.cut;
  return j;
}

ojson states_json(const std::map<int, State>& states) {
  ojson j = ojson::object();
  for (const auto& [r, s] : states) j[std::to_string(r)] = state_name(s);
  return j;
}

}  // namespace

std::string render_text(const Report& rep) {
  const auto& in = rep.inputs;
  std::vector<int> ranks;
  std::set<std::string> formats, versions;
  for (const auto& d : in.dumps) {
    ranks.push_back(d.rank);
    formats.insert(d.format);
    versions.insert(d.version.empty() ? "none" : d.version);
  }
  std::string out = "fr: " + std::to_string(in.dumps.size()) + " dump" +
                    (in.dumps.size() == 1 ? "" : "s") + " read (" +
                    (ranks.size() == 1 ? "rank " : "ranks ") + ranks_or_none(ranks) + "), " +
                    clean_text(join({formats.begin(), formats.end()}, ", ")) + ", version " +
                    clean_text(join({versions.begin(), versions.end()}, ", ")) + "\n";
  // The causes lead, then what explains them.
  for (const auto& f : rep.findings) {
    if (f.causes.empty()) continue;
    out += "cause: " + ranks_who(f.causes) + ": " + f.kind + ": " + clean_text(f.text);
    if (!f.waiting.empty()) out += " (" + ranks_who(f.waiting) + " waiting elsewhere)";
    out += "\n";
  }
  for (const auto& n : rep.notes) out += "note: " + clean_text(n) + "\n";
  for (const auto& d : in.dumps)
    for (const auto& n : d.notes)
      out += "note: rank " + std::to_string(d.rank) + " (" + clean_text(d.path) +
             "): " + clean_text(n) + "\n";
  for (const auto& f : rep.findings) {
    if (!f.causes.empty()) continue;
    out += f.kind + ": " + clean_text(f.text);
    if (!f.waiting.empty()) out += " (" + ranks_who(f.waiting) + " waiting elsewhere: not a cause)";
    if (!f.in_flight.empty())
      out += " (" + ranks_who(f.in_flight) + " in flight: nobody holds the work it is in)";
    out += "\n";
  }
  out += waiting_text(rep);
  for (const auto& g : rep.groups) {
    if (g.waits_at < 0) continue;
    out += "waits: " + clean_text(group_label(g.name, g.desc, g.ranks, g.shared_name)) + " at " +
           clean_text(describe(g.waits_at, g.waits_op)) + "\n";
  }
  for (const auto& p : in.problems)
    out += "file: " + clean_text(p.path) +
           (p.rank ? " (rank " + std::to_string(*p.rank) + ")" : "") + ": " + p.kind + ": " +
           clean_text(p.detail) + "\n";
  if (!rep.no_dump_ranks.empty())
    out += "no dump: ranks " + rank_list(rep.no_dump_ranks) + " (not judged)\n";
  if (!rep.waiting_ranks.empty())
    out += "waiting ranks: " + rank_list(rep.waiting_ranks) + " (not causes)\n";
  out += rep.suspect_ranks.empty() ? std::string("suspect ranks: none\n")
                                   : "suspect ranks: " + rank_list(rep.suspect_ranks) + "\n";
  return out;
}

ojson render_json(const Report& rep) {
  ojson j = ojson::object();
  j["schema"] = kSchema;
  j["suspect_ranks"] = rep.suspect_ranks;
  j["waiting_ranks"] = rep.waiting_ranks;
  j["in_flight_ranks"] = rep.in_flight_ranks;
  j["no_dump_ranks"] = rep.no_dump_ranks;
  j["ranks"] = rep.ranks;
  ojson findings = ojson::array();
  for (const auto& f : rep.findings) {
    ojson x = ojson::object();
    x["kind"] = f.kind;
    x["group"] = clean_text(f.group);
    x["group_desc"] = clean_text(f.group_desc);
    x["group_ranks"] = f.group_ranks;
    x["ranks"] = f.ranks;
    if (f.kind != "no-dump") {
      x["causes"] = f.causes;
      x["waiting"] = f.waiting;
      x["in_flight"] = f.in_flight;
    }
    const ojson op = op_json(f.seq, f.op);  // a named value: items() refers into it
    for (const auto& [k, v] : op.items()) x[k] = v;
    x["states"] = states_json(f.states);
    if (f.kind == "gpu-stopped" || f.kind == "queued-far-past") x["peers"] = f.peers;
    if (f.kind == "queued-far-past") x["peers_completed"] = f.peers_completed;
    x["text"] = clean_text(f.text);
    findings.push_back(std::move(x));
  }
  j["findings"] = std::move(findings);
  ojson waits = ojson::array();
  for (const auto& w : rep.waits) {
    ojson x = ojson::object();
    x["rank"] = w.rank;
    x["group"] = clean_text(w.group);
    x["group_desc"] = clean_text(w.group_desc);
    x["group_ranks"] = w.group_ranks;
    const ojson op = op_json(w.seq, w.op);
    for (const auto& [k, v] : op.items()) x[k] = v;
    x["state"] = state_name(w.state);
    x["p2p"] = w.p2p;
    x["for"] = w.for_ranks;
    x["for_no_dump"] = w.for_no_dump;
    waits.push_back(std::move(x));
  }
  j["waits"] = std::move(waits);
  ojson groups = ojson::array();
  for (const auto& g : rep.groups) {
    ojson x = ojson::object();
    x["name"] = clean_text(g.name);
    x["desc"] = clean_text(g.desc);
    x["ranks"] = g.ranks;
    x["ranks_from"] = g.ranks_from_config ? "pg_config" : "entries";
    x["shared_name"] = g.shared_name;
    x["carries_p2p"] = g.carries_p2p;
    x["no_dump_ranks"] = g.no_dump;
    x["other_view_ranks"] = g.other_view;
    ojson per = ojson::array();
    for (const auto& t : g.tracks) {
      ojson r = ojson::object();
      r["rank"] = t.rank;
      r["dumped"] = t.dumped;
      r["known"] = t.known;
      if (t.known) {
        r["last_enqueued"] = t.enqueued;
        r["last_started"] = t.started;
        r["last_completed"] = t.completed;
        r["starts_recorded"] = t.starts_recorded;
        r["pg_status_used"] = t.status_used;
      }
      per.push_back(std::move(r));
    }
    x["per_rank"] = std::move(per);
    if (g.waits_at >= 0) {
      ojson w = op_json(g.waits_at, g.waits_op);
      w["states"] = states_json(g.waits_states);
      x["waits_at"] = std::move(w);
    } else {
      x["waits_at"] = nullptr;
    }
    groups.push_back(std::move(x));
  }
  j["groups"] = std::move(groups);
  ojson dumps = ojson::array();
  for (const auto& d : rep.inputs.dumps) {
    ojson x = ojson::object();
    x["rank"] = d.rank;
    x["path"] = clean_text(d.path);
    x["format"] = d.format;
    x["version"] = clean_text(d.version);
    x["entries"] = d.entries.size();
    ojson notes = ojson::array();
    for (const auto& n : d.notes) notes.push_back(clean_text(n));
    x["notes"] = std::move(notes);
    dumps.push_back(std::move(x));
  }
  j["dumps"] = std::move(dumps);
  ojson files = ojson::array();
  for (const auto& p : rep.inputs.problems) {
    ojson x = ojson::object();
    x["path"] = clean_text(p.path);
    x["rank"] = p.rank ? ojson(*p.rank) : ojson(nullptr);
    x["problem"] = p.kind;
    x["detail"] = clean_text(p.detail);
    files.push_back(std::move(x));
  }
  j["unread_files"] = std::move(files);
  ojson notes = ojson::array();
  for (const auto& n : rep.notes) notes.push_back(clean_text(n));
  j["notes"] = std::move(notes);
  return j;
}

}  // namespace gpudiag::fr
