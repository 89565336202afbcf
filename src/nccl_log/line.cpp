// Hand-written reader for NCCL's log line grammar (see line.h). No regex library: the grammar
// is a handful of token shapes read right to left from the level word, and a log can have
// millions of lines.
#include "nccl_log/line.h"

#include <cctype>
#include <vector>

#include "util/strings.h"

namespace gpudiag::nccl_log {

namespace {

struct Token {
  std::string_view text;
  std::size_t pos;  // offset in the line
};

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::size_t b = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > b) out.push_back({s.substr(b, i - b), b});
  }
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::optional<long> to_long(std::string_view s) {
  if (!all_digits(s) || s.size() > 12) return std::nullopt;
  auto v = parse_int(s);
  if (!v) return std::nullopt;
  return static_cast<long>(*v);
}

/// "[3]" -> 3.
std::optional<int> device_token(std::string_view t) {
  if (t.size() < 3 || t.front() != '[' || t.back() != ']') return std::nullopt;
  auto v = to_long(t.substr(1, t.size() - 2));
  if (!v || *v > 100000) return std::nullopt;
  return static_cast<int>(*v);
}

/// "misc/socket.cc:483" or "ncclProxyProgress:123": NAME:DIGITS with a name that is not a number.
bool source_token(std::string_view t) {
  auto colon = t.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  if (!all_digits(t.substr(colon + 1))) return false;
  auto name = t.substr(0, colon);
  if (name.find(':') != std::string_view::npos || all_digits(name)) return false;
  return name.front() != '[';
}

bool float_token(std::string_view t) {
  bool digit = false;
  for (char c : t) {
    if (std::isdigit(static_cast<unsigned char>(c)))
      digit = true;
    else if (c != '.')
      return false;
  }
  return digit;
}

/// "host:pid:tid" or "pid:tid".
bool host_token(std::string_view t, Line& out) {
  auto c2 = t.rfind(':');
  if (c2 == std::string_view::npos || c2 == 0) return false;
  auto tid = to_long(t.substr(c2 + 1));
  if (!tid) return false;
  auto c1 = t.rfind(':', c2 - 1);
  std::string_view pid_text =
      c1 == std::string_view::npos ? t.substr(0, c2) : t.substr(c1 + 1, c2 - c1 - 1);
  auto pid = to_long(pid_text);
  if (!pid) return false;
  out.pid = *pid;
  out.tid = *tid;
  if (c1 != std::string_view::npos) out.host = std::string(t.substr(0, c1));
  return true;
}

// --- launcher prefixes --------------------------------------------------------------------

std::size_t read_number(std::string_view s, std::size_t i, int& value) {
  std::size_t b = i;
  long v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - b < 9)
    v = v * 10 + (s[i++] - '0');
  if (i == b) return 0;
  value = static_cast<int>(v);
  return i - b;
}

/// "[1,3]<stdout>:" -> 3 (Open MPI --tag-output: [jobid,rank]<stream>:).
std::size_t ompi_prefix(std::string_view s, int& rank) {
  int job = 0;
  if (s.empty() || s[0] != '[') return 0;
  std::size_t i = 1, n = read_number(s, i, job);
  if (!n) return 0;
  i += n;
  if (i >= s.size() || s[i] != ',') return 0;
  n = read_number(s, ++i, rank);
  if (!n) return 0;
  i += n;
  if (s.substr(i, 2) != "]<") return 0;
  auto close = s.find(">:", i);
  if (close == std::string_view::npos || close - i > 12) return 0;
  return close + 2;
}

/// "[default3]:" / "[rank3]:" -> 3 (torchrun's tee prefixes: role name + local rank, or rank).
std::size_t torchrun_prefix(std::string_view s, int& rank) {
  for (std::string_view word : {"[default", "[rank"}) {
    if (!s.starts_with(word)) continue;
    std::size_t n = read_number(s, word.size(), rank);
    if (n && s.substr(word.size() + n, 2) == "]:") return word.size() + n + 2;
  }
  return 0;
}

/// "  3: " -> 3 (srun --label pads the task id with spaces).
std::size_t srun_prefix(std::string_view s, int& rank) {
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  std::size_t n = read_number(s, i, rank);
  if (!n || n > 6) return 0;
  i += n;
  if (s.substr(i, 2) != ": ") return 0;
  return i + 2;
}

/// Strips stacked launcher prefixes from the front of `s`; records them in `out`.
std::string_view strip_launchers(std::string_view s, Line& out) {
  for (int guard = 0; guard < 4; ++guard) {
    int rank = -1;
    std::size_t n = ompi_prefix(s, rank);
    if (!n) n = torchrun_prefix(s, rank);
    if (!n) n = srun_prefix(s, rank);
    if (!n) break;
    out.launcher += std::string(trim(s.substr(0, n)));
    out.launcher_rank = rank;
    s.remove_prefix(n);
  }
  return s;
}

/// A timestamp in the text before the host part: "[2024-05-01 10:00:00]" or an ISO token.
std::string find_timestamp(std::string_view prefix) {
  for (std::size_t open = prefix.find('['); open != std::string_view::npos;
       open = prefix.find('[', open + 1)) {
    auto close = prefix.find(']', open);
    if (close == std::string_view::npos) break;
    auto inside = prefix.substr(open + 1, close - open - 1);
    bool digit = false, sep = false;
    for (char c : inside) {
      digit |= std::isdigit(static_cast<unsigned char>(c)) != 0;
      sep |= c == '-' || c == ':';
    }
    if (digit && sep && inside.size() >= 8) return std::string(trim(inside));
  }
  for (const auto& t : tokenize(prefix)) {
    auto v = t.text;
    if (v.size() >= 10 && std::isdigit(static_cast<unsigned char>(v[0])) && v[4] == '-' &&
        v[7] == '-')
      return std::string(v);
  }
  return {};
}

std::optional<Level> level_word(std::string_view t) {
  if (t == "INFO") return Level::info;
  if (t == "WARN") return Level::warn;
  if (t == "TRACE") return Level::trace;
  if (t == "CALL") return Level::call;
  return std::nullopt;
}

/// Index of the level word and whether "NCCL" preceded it; -1 when none.
int find_level(const std::vector<Token>& tok, Line& out) {
  for (std::size_t i = 0; i + 1 < tok.size(); ++i) {
    if (tok[i].text != "NCCL") continue;
    if (auto lv = level_word(tok[i + 1].text)) {
      out.level = *lv;
      return static_cast<int>(i + 1);
    }
  }
  // NCCL 2.0-2.3: "host:pid:tid [0] INFO ..." / "... include/socket.h:344 WARN ...".
  for (std::size_t i = 1; i < tok.size(); ++i) {
    auto lv = level_word(tok[i].text);
    if (!lv || (*lv != Level::info && *lv != Level::warn)) continue;
    if (device_token(tok[i - 1].text) || source_token(tok[i - 1].text)) {
      out.level = *lv;
      out.legacy = true;
      return static_cast<int>(i);
    }
  }
  return -1;
}

/// "NCCL version 2.19.3+cuda12.3" near the start of a line.
bool bare_version(std::string_view s, const std::vector<Token>& tok, Line& out) {
  for (std::size_t i = 0; i + 2 < tok.size() && i <= 2; ++i) {
    if (tok[i].text != "NCCL" || tok[i + 1].text != "version") continue;
    auto v = tok[i + 2].text;
    if (!std::isdigit(static_cast<unsigned char>(v[0])) || v.find('.') == std::string_view::npos)
      return false;
    out.level = Level::version;
    out.message = std::string(trim(s.substr(tok[i].pos)));
    return true;
  }
  return false;
}

}  // namespace

const char* level_name(Level level) {
  switch (level) {
    case Level::info:
      return "INFO";
    case Level::warn:
      return "WARN";
    case Level::trace:
      return "TRACE";
    case Level::call:
      return "CALL";
    case Level::version:
      return "VERSION";
  }
  return "?";
}

std::string_view strip_launcher_prefixes(std::string_view s, Line& out) {
  return strip_launchers(s, out);
}

std::optional<Line> parse_line(std::string_view raw) {
  Line out;
  std::string_view s = raw;
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  s = strip_launchers(s, out);
  auto tok = tokenize(s);
  if (tok.empty()) return std::nullopt;

  int lv = find_level(tok, out);
  if (lv < 0) {
    if (bare_version(s, tok, out)) return out;
    return std::nullopt;
  }
  // The message: everything after the level word and one blank.
  std::size_t after = tok[lv].pos + tok[lv].text.size();
  auto rest = s.substr(after);
  if (!rest.empty() && (rest[0] == ' ' || rest[0] == '\t')) rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  out.message = std::string(rest);

  // Right to left from the level word (skipping "NCCL" when present).
  int k = out.legacy ? lv - 1 : lv - 2;
  if (out.level == Level::warn) {
    if (k >= 0 && tok[k].text.size() > 2 && tok[k].text.front() == '(' &&
        tok[k].text.back() == ')') {
      out.function = std::string(tok[k].text.substr(1, tok[k].text.size() - 2));
      --k;
    }
    if (k >= 0 && source_token(tok[k].text)) out.source = std::string(tok[k--].text);
  } else if (out.level == Level::trace) {
    if (k >= 0 && source_token(tok[k].text)) out.source = std::string(tok[k--].text);
    if (k >= 0 && float_token(tok[k].text)) --k;
  }
  if (k >= 0) {
    if (auto dev = device_token(tok[k].text)) out.device = *dev, --k;
  }
  if (k >= 0 && host_token(tok[k].text, out)) --k;

  bool identified = out.pid >= 0 || out.device >= 0 || !out.source.empty();
  if (!identified) return std::nullopt;
  if (k >= 0) out.timestamp = find_timestamp(s.substr(0, tok[k + 1].pos));
  return out;
}

std::optional<ChainStep> parse_chain_step(std::string_view message) {
  auto tok = tokenize(message);
  if (tok.size() < 3 || tok[1].text != "->" || !source_token(tok[0].text)) return std::nullopt;
  auto code = to_long(tok[2].text);
  if (!code || *code > 1000) return std::nullopt;
  ChainStep step{std::string(tok[0].text), static_cast<int>(*code), {}};
  if (tok.size() > 3) {
    auto thread = trim(message.substr(tok[3].pos));
    if (thread.size() >= 2 && thread.front() == '[' && thread.back() == ']')
      thread = thread.substr(1, thread.size() - 2);
    step.thread = std::string(thread);
  }
  return step;
}

std::string result_name(int code) {
  static const char* names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                "ncclRemoteError",   "ncclInProgress"};
  if (code >= 0 && code < static_cast<int>(std::size(names))) return names[code];
  return "ncclResult " + std::to_string(code);
}

std::string result_meaning(int code) {
  switch (code) {
    case 0:
      return "success";
    case 1:
      return "a CUDA call failed";
    case 2:
      return "a system call or external library failed (socket, shared memory, ibverbs)";
    case 3:
      return "internal error, usually the echo of a failure on this or another rank";
    case 4:
      return "an invalid argument was passed to NCCL";
    case 5:
      return "NCCL was used in a way it does not support (or ranks disagree)";
    case 6:
      return "a remote peer failed or the network connection broke";
    case 7:
      return "an operation is still in progress";
    default:
      return "unknown result code";
  }
}

}  // namespace gpudiag::nccl_log
