#include "report/bench_report.h"

#include <cstdio>
#include <set>

#include "checks/verify.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

struct Row {
  double bytes = 0, seconds = 0;
  int slowest = -1;
};

/// Per size, the slowest rank's time: a collective finishes when its last rank does.
std::vector<Row> rows(const CheckResult& result) {
  std::vector<Row> out;
  for (const auto& r : result.table) {
    if (!r) continue;
    for (std::size_t i = 0; i < r->sweep.size(); ++i) {
      if (out.size() <= i) out.push_back({r->sweep[i][0], 0, -1});
      if (r->sweep[i][1] > out[i].seconds) {
        out[i].seconds = r->sweep[i][1];
        out[i].slowest = r->rank;
      }
    }
  }
  return out;
}

}  // namespace

std::string bench_table(const CheckResult& result) {
  const int n = static_cast<int>(result.table.size());
  std::set<std::string> hosts;
  for (const auto& r : result.table)
    if (r) hosts.insert(r->host);
  std::string out = "all-reduce (float sum), " + std::to_string(n) + " ranks on " +
                    std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts") +
                    ", backend " + result.me.backend + "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%12s %12s %12s %12s  %s\n", "size", "time", "algbw", "busbw",
                "slowest rank");
  out += line;
  for (const auto& row : rows(result)) {
    double algbw = row.seconds > 0 ? row.bytes / row.seconds / 1e9 : 0;
    double busbw = allreduce_busbw_gbps(row.bytes, row.seconds, n);
    if (n == 1)  // nothing crosses a link: no bandwidth to report
      std::snprintf(line, sizeof line, "%12s %12s %12s %7.2f GB/s  %d\n",
                    human_bytes(static_cast<std::uint64_t>(row.bytes)).c_str(),
                    human_seconds(row.seconds).c_str(), "-", busbw, row.slowest);
    else
      std::snprintf(line, sizeof line, "%12s %12s %7.2f GB/s %7.2f GB/s  %d\n",
                    human_bytes(static_cast<std::uint64_t>(row.bytes)).c_str(),
                    human_seconds(row.seconds).c_str(), algbw, busbw, row.slowest);
    out += line;
  }
  if (n == 1)
    out += "one rank: an all-reduce moves no data between ranks, so there is no bandwidth to "
           "measure (busbw 0, as nccl-tests prints it); run 2 or more ranks\n";
  return out;
}

nlohmann::json bench_json(const CheckResult& result) {
  nlohmann::json j;
  j["gpudiag"] = GPUDIAG_VERSION;
  j["collective"] = "all-reduce";
  j["world_size"] = result.table.size();
  j["backend"] = result.me.backend;
  auto& sizes = j["sizes"] = nlohmann::json::array();
  const int n = static_cast<int>(result.table.size());
  for (const auto& row : rows(result))
    sizes.push_back({{"bytes", row.bytes},
                     {"seconds", row.seconds},
                     {"algbw_gbps", n > 1 && row.seconds > 0 ? nlohmann::json(row.bytes / row.seconds / 1e9)
                                                             : nlohmann::json(nullptr)},
                     {"busbw_gbps", allreduce_busbw_gbps(row.bytes, row.seconds, n)},
                     {"slowest_rank", row.slowest}});
  return j;
}

}  // namespace gpudiag
