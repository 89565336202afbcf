// See record.h: the datagram's text read field by field, every number
// range-checked (std::from_chars: no locale, no exceptions, no overflow).
#include "stragglers/record.h"

#include <algorithm>
#include <charconv>

#include "util/text.h"

namespace gpudiag::stragglers {

namespace {

constexpr std::int64_t kMaxTimeNs = std::int64_t{1} << 62;
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 48;

bool op_name(std::string_view word) {
  if (word.empty() || word.size() > 32) return false;
  return std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

/// GROUP SEQ OP, the words every record starts with, into `a`.
bool read_head(std::string_view& line, Arrival& a) {
  std::int64_t group = 0, seq = 0;
  if (!word_int(next_word(line), 0, kMaxGroupId - 1, group)) return false;
  if (!word_int(next_word(line), 0, kMaxSeq, seq)) return false;
  const auto op = next_word(line);
  if (!op_name(op)) return false;
  a.group = static_cast<int>(group);
  a.seq = seq;
  a.op = std::string(op);
  return true;
}

}  // namespace

bool read_collective(std::string_view line, Arrival& a) {
  if (!read_head(line, a)) return false;
  if (!word_int(next_word(line), 1, kMaxTimeNs, a.arrival_ns)) return false;
  if (!word_int(next_word(line), 0, kMaxTimeNs, a.end_ns)) return false;
  if (!word_int(next_word(line), 0, kMaxTimeNs, a.forward_ns)) return false;
  a.runq_ns = a.kernel_ns = 0;
  if (const auto q = next_word(line); !q.empty() && !word_int(q, 0, kMaxTimeNs, a.runq_ns))
    return false;
  if (!next_word(line).empty()) return false;
  return a.end_ns == 0 || a.end_ns >= a.arrival_ns;
}

bool read_kernel(std::string_view line, Arrival& a) {
  constexpr std::int64_t kMaxKernelNs = std::int64_t{3600} * 1000000000;
  if (!read_head(line, a)) return false;
  if (!word_int(next_word(line), 1, kMaxTimeNs, a.arrival_ns)) return false;
  if (!word_int(next_word(line), 1, kMaxKernelNs, a.kernel_ns)) return false;
  if (!next_word(line).empty()) return false;
  a.end_ns = a.forward_ns = a.runq_ns = 0;
  return true;
}

bool read_group(std::string_view line, int world, GroupDecl& g) {
  std::int64_t group = 0;
  if (!word_int(next_word(line), 1, kMaxGroupId - 1, group)) return false;
  auto list = next_word(line);
  if (list.empty() || !next_word(line).empty()) return false;
  while (!list.empty()) {
    const auto comma = std::min(list.find(','), list.size());
    std::int64_t r = 0;
    if (!word_int(list.substr(0, comma), 0, world - 1, r)) return false;
    if (!g.ranks.empty() && r <= g.ranks.back()) return false;  // sorted, unique
    g.ranks.push_back(static_cast<int>(r));
    list.remove_prefix(std::min(comma + 1, list.size()));
  }
  g.group = static_cast<int>(group);
  return true;
}

std::optional<Datagram> parse_datagram(std::string_view text, int nproc, int world) {
  if (text.size() > kMaxDatagram || nproc < 1 || world < 1) return std::nullopt;
  Datagram d;
  bool header = true;
  std::size_t lines = 0;
  while (!text.empty()) {
    const auto nl = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(std::min(nl + 1, text.size()));
    if (header) {
      std::int64_t local = 0, dropped = 0;
      if (next_word(line) != "r" || !word_int(next_word(line), 0, nproc - 1, local) ||
          !word_int(next_word(line), 0, kMaxTimeNs, dropped) || !next_word(line).empty())
        return std::nullopt;
      d.local_rank = static_cast<int>(local);
      d.dropped = dropped;
      header = false;
      continue;
    }
    if (++lines > kMaxLines) {
      ++d.invalid;
      break;
    }
    if (line.size() > 256) {
      ++d.invalid;
      continue;
    }
    const auto kind = next_word(line);
    if (kind == "c") {
      Arrival a;
      if (read_collective(line, a)) d.arrivals.push_back(std::move(a));
      else ++d.invalid;
    } else if (kind == "d") {
      Arrival a;
      if (read_kernel(line, a)) d.arrivals.push_back(std::move(a));
      else ++d.invalid;
    } else if (kind == "g") {
      GroupDecl g;
      if (read_group(line, world, g)) d.groups.push_back(std::move(g));
      else ++d.invalid;
    } else {
      ++d.invalid;
    }
  }
  if (header) return std::nullopt;
  return d;
}

}  // namespace gpudiag::stragglers
