// gpudiag bench's nccl-tests layout (bench_report.h). The field widths and
// number formats are nccl-tests' own (src/util.cu there), so column-based
// parsers line up as well as whitespace-split ones.
#include "report/bench_report.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdio>

#include "checks/verdict.h"
#include "report/nccl_tests_json.h"
#include "report/status_line.h"

namespace gpudiag {

namespace {

/// "00000000:07:00.0" (CUDA) -> "0000:07:00" (nccl-tests' [%04x:%02x:%02x]).
std::string short_bus_id(const std::string& id) {
  auto parts = std::vector<std::string>{};
  std::size_t start = 0;
  for (std::size_t i = 0; i <= id.size(); ++i)
    if (i == id.size() || id[i] == ':' || id[i] == '.') {
      parts.push_back(id.substr(start, i - start));
      start = i + 1;
    }
  if (parts.size() < 3) return id.empty() ? "-" : id;
  std::string dom = parts[0].size() > 4 ? parts[0].substr(parts[0].size() - 4) : parts[0];
  return dom + ":" + parts[1] + ":" + parts[2];
}

std::string us(double s) { return fmt::format("{:.1f}", s * 1e6); }

}  // namespace

std::string nt_number(double value, int width) {
  for (const char* f : {"%*.2f", "%*.1f", "%*.0f"}) {
    char buf[64];
    const int n = std::snprintf(buf, sizeof buf, f, width, value);
    if (n <= width) return buf;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return buf;
}

void NcclTestsPrinter::out(const std::string& s) const { write_all(fd_, s); }

std::string NcclTestsPrinter::label(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(table_.size()) && table_[rank])
    return rank_label(*table_[rank]);
  return "rank " + std::to_string(rank);
}

void NcclTestsPrinter::begin(const std::vector<std::optional<RankRecord>>& table) {
  table_ = table;
  if (nt_) nt_->set_devices(table);
  // nccl-tests' first line, in the words its consumers look for; what runs
  // is said in the parentheses. No NCCL header was compiled in: 0.
  std::string s = fmt::format("# nccl-tests version {} nccl-headers=0 nccl-library={} (gpudiag "
                              "bench in nccl-tests' layout: {})\n",
                              kNcclTestsVersion, h_.nccl_code, h_.versions);
  s += "# Collective test starting: " + h_.program + "\n";
  const bool factor = h_.step_factor > 1;
  s += fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg "
      "iters: {} validation: {} graph: {} unalign: {}\n",
      h_.nthreads, h_.ngpus, h_.min_bytes, h_.max_bytes,
      factor ? fmt::format("{:g}", h_.step_factor) : std::to_string(h_.step_bytes),
      factor ? "factor" : "bytes", h_.warmup, h_.iters, h_.agg, h_.check, h_.graph, h_.unalign);
  // nccl-tests 2.19's words for -z 1, 2 and 3 (src/util.cu writeDeviceReport).
  if (h_.blocking_mode == 1)
    s += "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n";
  if (h_.blocking_mode == 2)
    s += "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n";
  if (h_.blocking_mode == 3)
    s += "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes "
         "barrier \n";
  for (const auto& note : h_.notes) s += "# gpudiag: " + note + "\n";
  s += "#\n# Using devices\n";
  for (std::size_t r = 0; r < table.size(); ++r) {
    const auto& rec = table[r];
    if (!rec) {
      s += fmt::format("#  Rank {:2d} (no record)\n", r);
      continue;
    }
    const bool gpu = rec->gpu_ordinal >= 0;
    s += fmt::format("#  Rank {:2d} Group {:2d} Pid {:6d} on {:>10} device {:2d} [{}] {}\n", r, 0,
                     rec->pid, rec->host, rec->gpu_ordinal,
                     gpu ? short_bus_id(rec->gpu_bus_id) : "host",
                     gpu ? rec->gpu_name : "host memory (" + rec->backend + " backend)");
  }
  s += "#\n";
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                  "
                   "     in-place          \n",
                   "", "", "", "", "");
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  "
                   "{:>6}  {:>6}  {:>6}\n",
                   "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                   "time", "algbw", "busbw", "#wrong");
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  "
                   "{:>6}  {:>6}  {:>6}\n",
                   "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                   "(GB/s)", "(GB/s)", "");
  out(s);
}

void NcclTestsPrinter::row(const BenchRow& r) {
  if (nt_) nt_->add_row(r);
  std::string s = fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", r.size, r.count,
                              dtype_name(r.type), r.redop, r.root);
  nlohmann::json jr = {{"size", r.size}, {"count", r.count}, {"type", dtype_name(r.type)},
                       {"redop", r.redop}, {"root", r.root}};
  for (int h = 0; h < 2; ++h) {
    const BenchHalf& b = r.half[h];
    s += "  " + nt_number(b.time_us, 7) + "  " + nt_number(b.algbw, 6) + "  " +
         nt_number(b.busbw, 6);
    s += b.wrong < 0 ? std::string("    N/A") : fmt::format("  {:>6}", b.wrong);
    jr[h ? "in_place" : "out_of_place"] = {
        {"time_us", b.time_us}, {"algbw_gbps", b.algbw}, {"busbw_gbps", b.busbw},
        {"wrong", b.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(b.wrong)}};
    if (b.wrong > 0) wrong_ += b.wrong;
    bw_sum_ += b.busbw;
    ++bw_count_;
  }
  s += "\n";
  if (!r.ungated.empty()) {
    s += fmt::format("# ungated: the row above includes launch time ({})\n", r.ungated);
    jr["ungated"] = r.ungated;
  }
  if (r.size >= largest_size_) {
    largest_size_ = r.size;
    largest_busbw_ = r.half[0].busbw;
  }
  // Which ranks saw wrong data, and the first wrong element of each (a few named).
  std::vector<int> bad;
  for (std::size_t q = 0; q < r.ranks.size(); ++q)
    if (r.ranks[q].wrong[0] > 0 || r.ranks[q].wrong[1] > 0) bad.push_back(static_cast<int>(q));
  nlohmann::json jbad = nlohmann::json::array();
  constexpr std::size_t kNamed = 8;
  for (std::size_t i = 0; i < bad.size() && i < kNamed; ++i) {
    const auto& m = r.ranks[bad[i]];
    s += fmt::format("# wrong on {}: {} out of place, {} in place; first: {}\n", label(bad[i]),
                     m.wrong[0], m.wrong[1], m.first_wrong);
    jbad.push_back({{"rank", bad[i]}, {"out_of_place", m.wrong[0]}, {"in_place", m.wrong[1]},
                    {"first", m.first_wrong}});
  }
  if (bad.size() > kNamed)
    s += fmt::format("# wrong on {} more ranks\n", bad.size() - kNamed);
  if (!bad.empty()) jr["wrong_ranks"] = jbad;
  // The slowest rank (mean time per iteration, out of place) and the median rank.
  if (!r.ranks.empty()) {
    std::vector<std::pair<double, int>> by_time;
    for (std::size_t q = 0; q < r.ranks.size(); ++q)
      by_time.push_back({r.ranks[q].mean_s[0], static_cast<int>(q)});
    std::sort(by_time.begin(), by_time.end());
    const auto& slow = r.ranks[by_time.back().second];
    const double median = by_time[by_time.size() / 2].first;
    // p50 and p99 exist only where each call was timed (-I); else negative.
    const bool spread = slow.p50_s[0] >= 0;
    slow_lines_.push_back(fmt::format(
        "# {:>12} {:>8} {:>4}: slowest {} {} us{}; median rank {} us", r.size, dtype_name(r.type),
        r.redop, label(by_time.back().second), us(slow.mean_s[0]),
        spread ? fmt::format(" (p50 {}, p99 {})", us(slow.p50_s[0]), us(slow.p99_s[0])) : "",
        us(median)));
    auto usec = [](double s) { return s >= 0 ? nlohmann::json(s * 1e6) : nlohmann::json(nullptr); };
    nlohmann::json per = nlohmann::json::array();
    for (std::size_t q = 0; q < r.ranks.size(); ++q) {
      const auto& m = r.ranks[q];
      per.push_back({{"rank", q},
                     {"out_of_place", {{"mean_us", m.mean_s[0] * 1e6}, {"p50_us", usec(m.p50_s[0])},
                                       {"p99_us", usec(m.p99_s[0])}}},
                     {"in_place", {{"mean_us", m.mean_s[1] * 1e6}, {"p50_us", usec(m.p50_s[1])},
                                   {"p99_us", usec(m.p99_s[1])}}}});
    }
    jr["slowest_rank"] = by_time.back().second;
    jr["ranks"] = std::move(per);
  }
  json_rows_.push_back(std::move(jr));
  out(s);
}

void NcclTestsPrinter::end() {
  std::string s = fmt::format("# {:<20} : {} {}\n", "Out of bounds values", wrong_,
                              wrong_ ? "FAILED" : "OK");
  s += fmt::format("# {:<20} : {:g} \n", "Avg bus bandwidth", avg_busbw());
  s += "#\n# Collective test concluded: " + h_.program + "\n#\n";
  if (!slow_lines_.empty()) {
    s += "# slowest rank per row (mean time per iteration out of place; its p50 and p99 with -I):\n";
    for (const auto& l : slow_lines_) s += l + "\n";
  }
  out(s);
}

nlohmann::json NcclTestsPrinter::json() const {
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t r = 0; r < table_.size(); ++r) {
    if (!table_[r]) continue;
    const auto& rec = *table_[r];
    devices.push_back({{"rank", r}, {"pid", rec.pid}, {"host", rec.host},
                       {"device", rec.gpu_ordinal}, {"bus_id", rec.gpu_bus_id},
                       {"name", rec.gpu_name}});
  }
  return {{"gpudiag", GPUDIAG_VERSION},
          {"collective", h_.program.substr(0, h_.program.rfind("_perf"))},
          {"world_size", table_.size()},
          {"backend", h_.backend},
          {"config",
           {{"minimum_bytes", h_.min_bytes}, {"maximum_bytes", h_.max_bytes},
            {"step_factor", h_.step_factor > 1 ? nlohmann::json(h_.step_factor) : nlohmann::json(nullptr)},
            {"step_bytes", h_.step_factor > 1 ? nlohmann::json(nullptr) : nlohmann::json(h_.step_bytes)},
            {"warmup_iters", h_.warmup}, {"iterations", h_.iters}, {"validation", h_.check},
            {"blocking", h_.blocking}, {"average", h_.average}}},
          {"devices", devices},
          {"results", json_rows_},
          {"out_of_bounds", {{"count", wrong_}, {"ok", wrong_ == 0}}},
          {"average_bus_bandwidth_gbps", avg_busbw()}};
}

}  // namespace gpudiag
