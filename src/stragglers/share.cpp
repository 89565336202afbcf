// See share.h: the outbox closes a batch at each publication and keeps the
// last few; the reader takes another node's value line by line, every field
// bounded.
#include "stragglers/share.h"

#include <algorithm>

#include "util/text.h"

namespace gpudiag::stragglers {

namespace {

constexpr std::int64_t kMaxSerial = std::int64_t{1} << 48;

std::string group_line(const GroupDecl& g) {
  std::string out = "g " + std::to_string(g.group) + " ";
  for (std::size_t i = 0; i < g.ranks.size(); ++i)
    out += (i ? "," : "") + std::to_string(g.ranks[i]);
  return out + "\n";
}

std::string record_line(const LocalRecord& r) {
  const Arrival& a = r.arrival;
  if (a.kernel_ns > 0)
    return "d " + std::to_string(r.local) + " " + std::to_string(a.group) + " " +
           std::to_string(a.seq) + " " + a.op + " " + std::to_string(a.arrival_ns) + " " +
           std::to_string(a.kernel_ns) + "\n";
  return "c " + std::to_string(r.local) + " " + std::to_string(a.group) + " " +
         std::to_string(a.seq) + " " + a.op + " " + std::to_string(a.arrival_ns) + " " +
         std::to_string(a.end_ns) + " " + std::to_string(a.forward_ns) + " " +
         std::to_string(a.runq_ns) + "\n";
}

}  // namespace

bool plain_host(std::string_view host) {
  if (host.empty() || host.size() > 64) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_';
  });
}

void Outbox::add(int local, const Arrival& a) {
  if (waiting_.size() >= kMaxWaiting) {
    ++lost_;
    return;
  }
  waiting_.push_back({local, a});
}

void Outbox::declare(const GroupDecl& g) {
  if (groups_.size() >= kMaxShareGroups) return;
  for (const auto& have : groups_)
    if (have.group == g.group) return;  // the first declaration stands, as in the judge
  groups_.push_back(g);
}

std::string Outbox::publish(int node, const std::string& host, bool final) {
  if (!waiting_.empty()) {  // no new batch without records: the last ones stay readable
    Batch b;
    b.serial = ++serial_;
    const std::size_t n = std::min(waiting_.size(), kMaxBatchRecords);
    b.records.assign(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
    waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
    kept_.push_back(std::move(b));
    while (kept_.size() > static_cast<std::size_t>(kKeptBatches)) kept_.pop_front();
  }
  std::string out = "s " + std::to_string(node) + " " + std::to_string(serial_) + " " +
                    (final && waiting_.empty() ? "1" : "0") + " " +
                    (plain_host(host) ? host : std::string("unknown")) + "\n";
  for (const auto& g : groups_) out += group_line(g);
  for (const auto& batch : kept_) {
    out += "b " + std::to_string(batch.serial) + "\n";
    for (const auto& r : batch.records) out += record_line(r);
  }
  return out;
}

std::optional<Share> parse_share(std::string_view text, int node, int nproc, int world) {
  if (text.size() > kMaxShareBytes || nproc < 1 || world < 1) return std::nullopt;
  Share s;
  bool header = true;
  std::size_t records = 0;
  std::int64_t last_serial = 0;  // batches come in increasing order, up to the header's
  while (!text.empty()) {
    const auto nl = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(std::min(nl + 1, text.size()));
    if (header) {
      std::int64_t n = 0, serial = 0, final = 0;
      if (next_word(line) != "s" || !word_int(next_word(line), node, node, n) ||
          !word_int(next_word(line), 0, kMaxSerial, serial) || !word_int(next_word(line), 0, 1, final))
        return std::nullopt;
      const auto host = next_word(line);
      if (!plain_host(host) || !next_word(line).empty()) return std::nullopt;
      s.node = static_cast<int>(n);
      s.serial = serial;
      s.final = final == 1;
      s.host = std::string(host);
      header = false;
      continue;
    }
    if (line.size() > 256) {
      ++s.invalid;
      continue;
    }
    const auto kind = next_word(line);
    if (kind == "g") {
      GroupDecl g;
      if (s.groups.size() < kMaxShareGroups && read_group(line, world, g))
        s.groups.push_back(std::move(g));
      else
        ++s.invalid;
    } else if (kind == "b") {
      std::int64_t serial = 0;
      if (!word_int(next_word(line), last_serial + 1, s.serial, serial) ||
          !next_word(line).empty() || s.batches.size() >= static_cast<std::size_t>(kKeptBatches)) {
        ++s.invalid;
        s.batches.push_back({-1, {}});  // its records are skipped with it
        continue;
      }
      s.batches.push_back({serial, {}});
      last_serial = serial;
    } else if (kind == "c" || kind == "d") {
      std::int64_t local = 0;
      LocalRecord r;
      if (s.batches.empty() || s.batches.back().serial < 0 ||
          ++records > kKeptBatches * kMaxBatchRecords || !word_int(next_word(line), 0, nproc - 1, local) ||
          !(kind == "c" ? read_collective(line, r.arrival) : read_kernel(line, r.arrival))) {
        ++s.invalid;
        continue;
      }
      r.local = static_cast<int>(local);
      s.batches.back().records.push_back(std::move(r));
    } else {
      ++s.invalid;
    }
  }
  if (header) return std::nullopt;
  std::erase_if(s.batches, [](const Batch& b) { return b.serial < 0; });
  return s;
}

}  // namespace gpudiag::stragglers
