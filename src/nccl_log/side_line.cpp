// Reader for PyTorch's ProcessGroupNCCL watchdog lines and NCCL's diagnostics lines (see
// side_line.h for every form and where it is written). By hand, like line.cpp: each form is one
// fixed phrase and a few "key=value" or "word: N" fields, and every line of a log that is not an
// NCCL line passes through here, so a line without one of the phrases costs a few searches.
#include "nccl_log/side_line.h"

#include <cctype>

#include "nccl_log/line.h"

namespace gpudiag::nccl_log {

namespace {

constexpr std::size_t kDetailCap = 300;

bool has(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

/// The signed integer at the start of `s` ("-1", "42"); nullopt when none or too long.
std::optional<long long> leading_number(std::string_view s) {
  std::size_t i = 0;
  bool negative = false;
  if (i < s.size() && s[i] == '-') negative = true, ++i;
  std::size_t start = i;
  long long v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - start < 18)
    v = v * 10 + (s[i++] - '0');
  if (i == start) return std::nullopt;
  return negative ? -v : v;
}

/// The number right after `key` in `s` ("SeqNum=" in "WorkNCCL(SeqNum=42, ..."), or nullopt.
std::optional<long long> number_after(std::string_view s, std::string_view key) {
  auto pos = s.find(key);
  if (pos == std::string_view::npos) return std::nullopt;
  return leading_number(s.substr(pos + key.size()));
}

/// "OpType=BROADCAST, NumelIn=..." -> "BROADCAST".
std::string word_after(std::string_view s, std::string_view key) {
  auto pos = s.find(key);
  if (pos == std::string_view::npos) return {};
  auto rest = s.substr(pos + key.size());
  std::size_t n = 0;
  while (n < rest.size() && n < 64 && rest[n] != ',' && rest[n] != ')' && rest[n] != ' ') ++n;
  return std::string(rest.substr(0, n));
}

/// "[rank3]:" anywhere before the message (pdsh's "host: [rank3]:", Ray's "(pid=1) [rank3]:",
/// a pasted "[80746] [rank0]:"), when the launcher prefixes at the front did not name a rank.
void find_torch_rank_prefix(std::string_view s, SideLine& out) {
  for (auto pos = s.find("[rank"); pos != std::string_view::npos; pos = s.find("[rank", pos + 1)) {
    auto n = leading_number(s.substr(pos + 5));
    if (!n || *n < 0 || *n > 100'000'000) continue;
    auto end = s.find("]:", pos + 5);
    if (end == std::string_view::npos || end > pos + 16) continue;
    out.launcher = std::string(s.substr(pos, end + 2 - pos));
    out.launcher_rank = static_cast<int>(*n);
    return;
  }
}

/// The rank and process group of the first "[Rank N]" / "[PG X Rank N]" / "[PG ID X PG GUID
/// G(desc) Rank N]" in `s`.
void read_rank_prefix(std::string_view s, SideLine& out) {
  std::size_t open = std::string_view::npos;
  for (std::string_view start : {"[Rank ", "[PG "}) {
    auto pos = s.find(start);
    if (pos < open) open = pos;
  }
  if (open == std::string_view::npos) return;
  auto close = s.find(']', open);
  if (close == std::string_view::npos || close - open > 200) return;
  auto inside = s.substr(open + 1, close - open - 1);
  auto rank_at = inside.rfind("Rank ");
  if (rank_at == std::string_view::npos) return;
  if (auto r = leading_number(inside.substr(rank_at + 5)); r && *r >= 0 && *r < 100'000'000)
    out.rank = static_cast<int>(*r);
  if (!inside.starts_with("PG ")) return;
  auto id = inside.substr(3);
  if (id.starts_with("ID ")) id.remove_prefix(3);
  out.pg = std::string(id.substr(0, id.find(' ')));
  if (auto lp = inside.find('('); lp != std::string_view::npos && lp < rank_at) {
    auto rp = inside.find(')', lp);
    if (rp != std::string_view::npos && rp < rank_at)
      out.pg_desc = std::string(inside.substr(lp + 1, rp - lp - 1));
  }
}

/// "WorkNCCL(SeqNum=42, OpType=BROADCAST, ..., Timeout(ms)=600000) ran for 600081 milliseconds".
void read_work(std::string_view s, SideLine& out) {
  auto work = s.find("WorkNCCL(");
  if (work == std::string_view::npos) return;
  auto w = s.substr(work);
  if (auto v = number_after(w, "SeqNum=")) out.seq = *v;
  out.op = word_after(w, "OpType=");
  if (auto v = number_after(w, "Timeout(ms)=")) out.timeout_ms = *v;
  if (auto v = number_after(w, " ran for ")) out.ran_ms = *v;
}

/// "... at work: 42, last enqueued NCCL work: 42, last completed NCCL work: 41."
bool read_status(std::string_view s, SideLine& out) {
  auto enq = s.find("ast enqueued NCCL work: ");  // "last" or "Last"
  if (enq == std::string_view::npos || enq == 0) return false;
  auto e = leading_number(s.substr(enq + 24));
  auto c = number_after(s.substr(enq), "last completed NCCL work: ");
  if (!e || !c) return false;
  out.kind = SideKind::seq_status;
  out.has_status = true;
  out.enqueued = *e;
  out.completed = *c;
  auto before = s.substr(0, enq);
  if (has(before, "update periodically")) {
    out.source = StatusSource::periodic;
  } else if (has(before, "Received a ") || has(before, "dump")) {
    out.source = StatusSource::dump;
  } else {
    out.source = StatusSource::error;
    for (std::string_view key : {"at work: ", "Timeout at NCCL work: "})
      if (auto v = number_after(before, key)) out.seq = *v;
  }
  return true;
}

std::string capped(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s.substr(0, kDetailCap));
}

std::optional<SideLine> parse_diag(std::string_view s, SideLine out) {
  auto pos = s.find("NCCL DIAG ");
  if (pos == std::string_view::npos) return std::nullopt;
  // NCCL starts the line with it; what a launcher or a pipe put before it ends in "] ", ") " or
  // ": " ("(pid=1) NCCL DIAG ..."). The text after it is a tagged result or the report's frame,
  // never prose ("see the NCCL DIAG report").
  auto before = s.substr(0, pos);
  if (!before.empty() && !before.ends_with("] ") && !before.ends_with(") ") &&
      !before.ends_with(": "))
    return std::nullopt;
  auto text = s.substr(pos + 10);
  if (!text.starts_with("[") && !text.starts_with("===") && !text.starts_with("NCCL diagnostics"))
    return std::nullopt;
  out.kind = SideKind::diag;
  out.diag_issue = text.starts_with("[INFO]");
  out.detail = capped(text);
  return out;
}

}  // namespace

bool is_timeout_text(std::string_view text) {
  return has(text, "Watchdog caught collective operation timeout") ||
         has(text, "timed out in blocking wait");
}

std::optional<SideLine> parse_side_line(std::string_view raw) {
  SideLine out;
  Line prefixes;
  std::string_view s = strip_launcher_prefixes(raw, prefixes);
  out.launcher = prefixes.launcher;
  out.launcher_rank = prefixes.launcher_rank;
  if (s.size() > 4 * kDetailCap * 8) return std::nullopt;  // no watchdog line is this long
  if (auto diag = parse_diag(s, out)) return diag;

  // The fixed phrases, most specific first: a watchdog error quotes the timeout it died of.
  auto error_at = s.find("watchdog thread terminated with exception");
  if (error_at != std::string_view::npos) {
    out.kind = SideKind::watchdog_error;
    auto what = s.substr(error_at);
    auto colon = what.find(": ");
    what = colon == std::string_view::npos ? std::string_view{} : what.substr(colon + 2);
    out.detail = capped(what);
    if (is_timeout_text(what)) read_work(what, out);
  } else if (has(s, "Watchdog caught collective operation timeout")) {
    out.kind = SideKind::timeout;
    read_work(s, out);
  } else if (has(s, "timed out in blocking wait")) {
    out.kind = SideKind::blocking_timeout;
    read_work(s, out);
  } else if (read_status(s, out)) {
    // kind and fields set
  } else if (has(s, "we are taking the entire process down")) {
    out.kind = SideKind::teardown;
  } else if (has(s, "Some NCCL operations have failed or timed out")) {
    out.kind = SideKind::failed;
  } else if (has(s, "Heartbeat monitor timed out") || has(s, "NCCL monitor thread timeout") ||
             has(s, "monitoring thread detects no heartbeat") || has(s, "watchdog got stuck for")) {
    out.kind = SideKind::heartbeat;
  } else {
    return std::nullopt;
  }
  if (out.launcher_rank < 0) find_torch_rank_prefix(s, out);
  // The rank prefix of the line itself, not of the exception text it quotes.
  read_rank_prefix(error_at == std::string_view::npos ? s : s.substr(0, error_at), out);
  return out;
}

}  // namespace gpudiag::nccl_log
