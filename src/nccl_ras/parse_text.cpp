// parse_text() (report.h): RAS's text report, line by line.
//
// The lines are those src/ras/client_support.cc prints (rasClientRunInit, rasClientRunComms,
// rasClientBreakDownErrors; NCCL 2.24.3 to 2.30.7): a header, the job summary, the
// communicator table, then "Errors" (INCOMPLETE: processes that did not answer; DEAD;
// per communicator "#G-C (hash) INCOMPLETE" and "... ERROR") and "Warnings" (TIMEOUT; per
// communicator "#G-C (hash) MISMATCH" with its status and operation-count groups). A
// group line ("3 ranks have launched up to operation 120") is followed by its ranks when
// RAS names them ("  Rank 2 -- GPU 2 managed by process 41 on node 10.0.0.1"); a lone
// outlier is one line ("  Rank 3 has launched up to operation 119 -- GPU ..."). Lines it
// does not know are skipped, so a later NCCL's additions do not stop it.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "nccl_ras/report.h"
#include "util/strings.h"

namespace gpudiag::ras {

namespace {

bool eat(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

/// A leading decimal number, consumed; nullopt when there is none.
std::optional<long long> number(std::string_view& s) {
  std::size_t n = 0;
  while (n < s.size() && n < 19 && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0) return std::nullopt;
  auto v = parse_int(s.substr(0, n));
  s.remove_prefix(n);
  return v;
}

std::vector<long long> numbers(std::string_view s) {
  std::vector<long long> out;
  for (const auto& word : split(s, ' '))
    if (auto v = parse_int(word)) out.push_back(*v);
  return out;
}

/// "GPU 2 managed by process 41 on node 10.0.0.1" or "[process information not found]".
ProcessRef where(std::string_view s) {
  ProcessRef p;
  if (!eat(s, "GPU ")) return p;
  auto by = s.rfind(" managed by process ");
  if (by == std::string_view::npos) return p;
  p.gpus = std::string(s.substr(0, by));
  s.remove_prefix(by + 20);
  if (auto pid = number(s)) p.pid = *pid;
  if (eat(s, " on node ")) p.host = std::string(s);
  return p;
}

/// "  Process 41 on node 10.0.0.1 managing GPUs 0,1"
std::optional<ProcessRef> process_line(std::string_view s) {
  if (!eat(s, "  Process ")) return std::nullopt;
  ProcessRef p;
  auto pid = number(s);
  if (!pid || !eat(s, " on node ")) return std::nullopt;
  p.pid = *pid;
  auto managing = s.find(" managing GPU");
  p.host = std::string(s.substr(0, managing));
  if (managing != std::string_view::npos) {
    s.remove_prefix(managing + 13);
    eat(s, "s");
    eat(s, " ");
    p.gpus = std::string(s);
  }
  return p;
}

/// "#0-1 (5a1e4c0ffee12345) MISMATCH": the group, the hash and the kind.
struct CommHeader {
  long long group = -1;
  std::string hash, kind;
};
std::optional<CommHeader> comm_header(std::string_view s) {
  CommHeader h;
  if (!eat(s, "#")) return std::nullopt;
  auto g = number(s);
  if (!g || !eat(s, "-") || !number(s) || !eat(s, " (")) return std::nullopt;
  auto close = s.find(") ");
  if (close == std::string_view::npos || close == 0 || close > 16) return std::nullopt;
  h.group = *g;
  h.hash = std::string(s.substr(0, close));
  h.kind = std::string(s.substr(close + 2));
  return h;
}

/// "2.28.9" -> {2, 28, 9}; missing parts are 0.
std::vector<long long> version_parts(std::string_view v) {
  std::vector<long long> out;
  for (const auto& part : split(v, '.')) out.push_back(parse_int(part).value_or(0));
  out.resize(3, 0);
  return out;
}

/// NCCL 2.26.2 to 2.28.9 stride over the ranks of each communicator but not over the
/// rasCollCommsMissingRank records that follow them (client_support.cc rasClientRunComms,
/// the loop that fills auxComms; 2.29.2 adds nMissingRanks * sizeof the record), so with two
/// communicators or more, those after one with missing ranks are read from the wrong bytes.
/// Missing ranks show as processes that did not answer or are dead, a communicator's
/// INCOMPLETE block, or ranks whose process answered without the communicator (NOCOMM).
/// The JSON (rasDumpCommsToJSON) strides right.
bool misaligned(const Report& r) {
  const auto v = version_parts(r.nccl_version);
  const bool buggy = v >= std::vector<long long>{2, 26, 0} && v < std::vector<long long>{2, 29, 2};
  if (!buggy || r.communicators < 2) return false;
  bool missing = !r.missing.empty() || r.unresponsive_count > 0 || r.dead_count > 0;
  for (const auto& m : r.mismatches)
    for (const auto& g : m.groups) missing = missing || g.value == "NOCOMM";
  return missing;
}

class TextReader {
 public:
  Report run(std::string_view reply) {
    r_.format = "text";
    bool first = true;
    for (const auto& raw : split(reply, '\n')) {
      std::string_view line = raw;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (first) {
        if (line.empty()) continue;
        if (!eat(line, "NCCL version "))
          throw ParseError("not NCCL RAS's report: its first line is not 'NCCL version ...'");
        r_.nccl_version = std::string(line.substr(0, line.find(' ')));
        first = false;
        continue;
      }
      take(line);
    }
    if (first) throw ParseError("RAS sent an empty report");
    if (!saw_errors_ || !saw_warnings_)
      throw ParseError("RAS's report ends early: no " +
                       std::string(saw_errors_ ? "Warnings" : "Errors") + " section");
    r_.rows_unreliable = misaligned(r_);
    return std::move(r_);
  }

 private:
  enum class Block { none, processes_missing, dead, comm_incomplete, comm_error, comm_mismatch };

  void take(std::string_view line) {
    if (line == "Errors" || line == "Warnings") {
      section_ = line == "Errors" ? 1 : 2;
      (section_ == 1 ? saw_errors_ : saw_warnings_) = true;
      block_ = Block::none;
      return;
    }
    if (section_ == 0) return header(line);
    if (line.empty()) return;
    if (auto h = comm_header(line)) return comm(*h);
    if (line == "INCOMPLETE" || line == "DEAD" || line == "TIMEOUT") {
      block_ = line == "INCOMPLETE" ? Block::processes_missing
               : line == "DEAD"     ? Block::dead
                                    : Block::none;
      return;
    }
    if (std::string_view s = line; eat(s, "  Encountered ")) {
      if (auto n = number(s)) r_.timeouts = *n;
      return;
    }
    switch (block_) {
      case Block::processes_missing:
      case Block::dead:
        return process_block(line);
      case Block::comm_incomplete:
        return incomplete(line);
      case Block::comm_error:
        return error(line);
      case Block::comm_mismatch:
        return mismatch(line);
      case Block::none:
        return;
    }
  }

  void header(std::string_view line) {
    if (std::string_view s = line; eat(s, "Communicators... (")) {
      r_.collection_s = std::atof(std::string(s).c_str());
      return;
    }
    if (line == "No communicator data collected!") r_.communicators = 0;
    if (line.starts_with("(total)")) {
      totals_ = line.find("per node") != std::string_view::npos ? 5 : 3;
      return;
    }
    auto v = numbers(line);
    if (totals_ == 5 && v.size() == 5) r_.nodes = v[0], r_.processes = v[3], r_.gpus = v[4];
    if (totals_ == 3 && v.size() == 3) r_.nodes = v[0], r_.processes = v[1], r_.gpus = v[2];
    totals_ = 0;
    // The communicator table: group, comms in it, nodes, ranks per node (maybe "2-4"),
    // ranks per comm, ranks in group, status, errors.
    auto words = split(line, ' ');
    std::erase(words, std::string());
    if (words.size() == 8 && parse_int(words[0]) >= 0 && parse_int(words[1]) >= 0 &&
        parse_int(words[4])) {
      r_.communicators = std::min<long long>(std::max<long long>(r_.communicators, 0) +
                                                 std::min<long long>(*parse_int(words[1]), 1 << 30),
                                             1LL << 40);
      const auto group = static_cast<std::size_t>(std::min<long long>(*parse_int(words[0]), 4096));
      if (group >= comm_size_.size()) comm_size_.resize(group + 1, -1);
      comm_size_[group] = *parse_int(words[4]);
    }
  }

  void comm(const CommHeader& h) {
    comm_ = h.hash;
    size_ = h.group >= 0 && static_cast<std::size_t>(h.group) < comm_size_.size()
                ? comm_size_[static_cast<std::size_t>(h.group)]
                : -1;
    if (h.kind == "INCOMPLETE") {
      block_ = Block::comm_incomplete;
      r_.missing.push_back({comm_, 0, {}});
    } else if (h.kind == "ERROR") {
      block_ = Block::comm_error;
      phase_.clear();
    } else if (h.kind == "MISMATCH") {
      block_ = Block::comm_mismatch;
      in_mismatch_ = false;
    } else {
      block_ = Block::none;
    }
  }

  void process_block(std::string_view line) {
    const bool dead = block_ == Block::dead;
    if (std::string_view s = line; eat(s, "  Missing communicator data from ")) {
      if (auto n = number(s)) r_.unresponsive_count = *n;
    } else if (std::string_view s = line; eat(s, "  ") && s.find(" considered dead") != s.npos) {
      if (auto n = number(s)) r_.dead_count = *n;
    } else if (auto p = process_line(line)) {
      (dead ? r_.dead : r_.unresponsive).push_back(*p);
    }
  }

  /// "  Rank 3 -- GPU ..." -> the rank and its process.
  static std::optional<RankRef> rank_line(std::string_view s) {
    if (!eat(s, "  Rank ")) return std::nullopt;
    auto n = number(s);
    if (!n || !eat(s, " -- ")) return std::nullopt;
    return RankRef{*n, where(s)};
  }

  void incomplete(std::string_view line) {
    auto& m = r_.missing.back();
    if (std::string_view s = line; eat(s, "  Missing communicator data from ")) {
      if (auto n = number(s)) m.count = *n;
    } else if (auto rank = rank_line(line)) {
      m.ranks.push_back(*rank);
    } else if (std::string_view s = line; eat(s, "  The missing rank")) {  // 2.24, 2.25
      s.remove_prefix(std::min(s.find(": "), s.size()));
      eat(s, ": ");
      for (const auto& w : split(s, ','))
        if (auto n = parse_int(w)) m.ranks.push_back({*n, {}});
    }
  }

  void error(std::string_view line) {
    std::string_view s = line;
    if (eat(s, "  Initialization error") || eat(s, "  Asynchronous error")) {
      phase_ = line.starts_with("  Init") ? "initialization" : "asynchronous";
      return;
    }
    if (eat(s, "  ")) {
      if (auto n = number(s); n && eat(s, " ranks reported ")) {
        r_.errors.push_back({comm_, phase_, std::string(s), *n, {}});
        return;
      }
    }
    if (auto rank = rank_line(line)) {
      if (!r_.errors.empty() && r_.errors.back().comm == comm_)
        r_.errors.back().ranks.push_back(*rank);
      return;
    }
    s = line;
    if (!eat(s, "  Rank ")) return;
    auto n = number(s);
    if (!n || !eat(s, " reported ")) return;
    auto sep = s.find(" -- ");
    if (sep == std::string_view::npos) return;
    RankError e{comm_, phase_, std::string(s.substr(0, sep)), 1, {}};
    e.ranks.push_back({*n, where(s.substr(sep + 4))});
    r_.errors.push_back(std::move(e));
  }

  Mismatch& current() { return r_.mismatches.back(); }

  void mismatch(std::string_view line) {
    std::string_view s = line;
    if (eat(s, "  Communicator ranks have different ")) {
      std::string what =
          s == "status" ? "status" : std::string(s.substr(0, s.find(" operation counts")));
      r_.mismatches.push_back({comm_, size_, what, {}, Motion::unknown, {}, {}});
      in_mismatch_ = true;
      return;
    }
    if (!in_mismatch_) return;
    if (auto rank = rank_line(line)) {
      if (!current().groups.empty()) current().groups.back().ranks.push_back(*rank);
      return;
    }
    s = line;
    if (!eat(s, "  ")) return;
    if (eat(s, "The unknown ranks: ")) {  // 2.24, 2.25: ranks RAS knows nothing else of
      if (!current().groups.empty())
        for (const auto& w : split(s, ','))
          if (auto n = parse_int(w)) current().groups.back().ranks.push_back({*n, {}});
      return;
    }
    const bool one = eat(s, "Rank ");
    if (one) {
      std::string_view list = s.substr(0, s.find(' '));
      s.remove_prefix(list.size());
      ValueGroup g{value_of(s), 1, {}};
      if (g.value.empty()) return;
      auto sep = s.find(" -- ");
      for (const auto& w : split(list, ','))
        if (auto n = parse_int(w))
          g.ranks.push_back({*n, sep == s.npos ? ProcessRef{} : where(s.substr(sep + 4))});
      g.count = static_cast<long long>(std::max<std::size_t>(g.ranks.size(), 1));
      current().groups.push_back(std::move(g));
      return;
    }
    auto n = number(s);
    if (!n || !eat(s, " ranks")) return;
    ValueGroup g{value_of(s), *n, {}};
    if (!g.value.empty()) current().groups.push_back(std::move(g));
  }

  /// " have launched up to operation 120" / " has not launched any operations" /
  /// " have status ABORT" -> "120" / "0" / "ABORT"; "" when none of these.
  static std::string value_of(std::string_view s) {
    if (!eat(s, " have ") && !eat(s, " has ")) return {};
    if (eat(s, "launched up to operation ")) return std::string(s.substr(0, s.find(' ')));
    if (eat(s, "not launched any operations")) return "0";
    if (eat(s, "status ")) return std::string(s.substr(0, s.find(' ')));
    return {};
  }

  Report r_;
  int section_ = 0;  // 0 header, 1 Errors, 2 Warnings
  bool saw_errors_ = false, saw_warnings_ = false;
  int totals_ = 0;
  std::vector<long long> comm_size_;
  Block block_ = Block::none;
  std::string comm_, phase_;
  long long size_ = -1;
  bool in_mismatch_ = false;
};

}  // namespace

Report parse_text(std::string_view reply) { return TextReader().run(reply); }

}  // namespace gpudiag::ras
