// nccl-tests' JSON for `gpudiag bench -J` (nccl_tests_json.h). Every key and
// type follows nccl-tests 2.19's writer (src/util.cu: jsonOutputInit,
// writeDeviceReport, writeBenchmarkLine*, writePerIterReport,
// writeResultFooter, writeErrors, jsonOutputFinalize).
#include "report/nccl_tests_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "util/env.h"
#include "util/secret.h"
#include "util/text.h"

namespace gpudiag {

namespace {

constexpr int kJsonFileVersion = 3;  // nccl-tests' JSON_FILE_VERSION

/// "%Y-%m-%d %H:%M:%S" in local time (TIME_STRING_FORMAT).
std::string now_text() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

/// jsonBool: nccl-tests writes booleans as the strings "true" and "false".
std::string jbool(bool v) { return v ? "true" : "false"; }

/// jsonDouble: a number, or the string "nan".
nlohmann::ordered_json jdouble(double v) {
  if (std::isnan(v)) return "nan";
  return v;
}

std::string short_bus(const std::string& id) {
  // "00000000:07:00.0" -> "0000:07:00", as the device lines print it.
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= id.size(); ++i)
    if (i == id.size() || id[i] == ':' || id[i] == '.') {
      parts.push_back(id.substr(start, i - start));
      start = i + 1;
    }
  if (parts.size() < 3) return id.empty() ? "host" : id;
  const std::string dom = parts[0].size() > 4 ? parts[0].substr(parts[0].size() - 4) : parts[0];
  return dom + ":" + parts[1] + ":" + parts[2];
}

}  // namespace

nlohmann::ordered_json per_iter_json(const std::vector<std::vector<float>>& times, int skip) {
  std::size_t iters = times.empty() ? 0 : times.front().size();
  for (const auto& t : times) iters = std::min(iters, t.size());
  std::vector<double> max_us(iters, 0);
  for (const auto& t : times)
    for (std::size_t i = 0; i < iters; ++i) max_us[i] = std::max(max_us[i], double{t[i]});
  const std::size_t from = std::min<std::size_t>(static_cast<std::size_t>(std::max(skip, 0)),
                                                 iters ? iters - 1 : 0);
  std::vector<double> s(max_us.begin() + static_cast<std::ptrdiff_t>(from), max_us.end());
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  auto pct = [&](int p) { return n ? s[std::min(n - 1, (n * p + 99) / 100 - 1)] : 0.0; };
  double sum = 0, var = 0;
  for (double v : s) sum += v;
  const double avg = n ? sum / static_cast<double>(n) : 0;
  for (double v : s) var += (v - avg) * (v - avg);
  const double stdev = n ? std::sqrt(var / static_cast<double>(n)) : 0;
  nlohmann::ordered_json j;
  j["skipped_iterations"] = static_cast<int>(from);
  j["min_us"] = jdouble(n ? s.front() : 0);
  j["max_us"] = jdouble(n ? s.back() : 0);
  j["avg_us"] = jdouble(avg);
  j["p50_us"] = jdouble(n ? s[n / 2] : 0);
  j["p95_us"] = jdouble(pct(95));
  j["p99_us"] = jdouble(pct(99));
  j["stdev_us"] = jdouble(stdev);
  j["cv_pct"] = jdouble(avg > 0 ? stdev / avg * 100.0 : 0.0);
  j["times_us"] = max_us;
  if (times.size() > 1) {
    nlohmann::ordered_json per = nlohmann::ordered_json::array();
    for (const auto& t : times)
      per.push_back(std::vector<double>(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(iters)));
    j["per_process_max_times_us"] = std::move(per);
  }
  return j;
}

NcclTestsJson::NcclTestsJson(const BenchHeader& header, bool per_iter, int per_iter_skip)
    : h_(header), per_iter_(per_iter), skip_(per_iter_skip), start_time_(now_text()) {}

void NcclTestsJson::set_devices(const std::vector<std::optional<RankRecord>>& table) {
  for (std::size_t r = 0; r < table.size(); ++r) {
    if (!table[r]) continue;
    const auto& rec = *table[r];
    const bool gpu = rec.gpu_ordinal >= 0;
    nlohmann::ordered_json d;
    d["rank"] = static_cast<int>(r);
    d["group"] = 0;
    d["pid"] = rec.pid;
    d["hostname"] = rec.host;
    d["device"] = rec.gpu_ordinal;
    d["device_hex"] = gpu ? short_bus(rec.gpu_bus_id) : "host";
    d["device_info"] = gpu ? rec.gpu_name : "host memory (" + rec.backend + " backend)";
    devices_.push_back(std::move(d));
  }
}

void NcclTestsJson::add_row(const BenchRow& r) {
  nlohmann::ordered_json j;
  j["size"] = r.size;
  j["count"] = r.count;
  j["type"] = dtype_name(r.type);
  j["redop"] = r.redop;
  char root[16];
  std::snprintf(root, sizeof root, "%6i", r.root);
  j["root"] = root;  // nccl-tests writes the printed "%6i" text
  for (int h = 0; h < 2; ++h) {
    const BenchHalf& b = r.half[h];
    nlohmann::ordered_json half;
    half["time"] = jdouble(b.time_us);
    half["alg_bw"] = jdouble(b.algbw);
    half["bus_bw"] = jdouble(b.busbw);
    half["nwrong"] = b.wrong < 0 ? nlohmann::ordered_json(nullptr)
                                 : nlohmann::ordered_json(static_cast<double>(b.wrong));
    j[h ? "in_place" : "out_of_place"] = std::move(half);
    if (per_iter_ && !r.iter_us[h].empty())
      j[h ? "in_place_per_iter" : "out_of_place_per_iter"] = per_iter_json(r.iter_us[h], skip_);
  }
  if (!r.ungated.empty()) j["ungated"] = r.ungated;  // gpudiag's: launch time in the figures
  j["actual_iterations"] = h_.iters;
  j["experiment_name"] = "";
  results_.push_back(std::move(j));
}

nlohmann::ordered_json NcclTestsJson::document(std::int64_t wrong, double avg_busbw,
                                               const nlohmann::json& gpudiag,
                                               const std::vector<std::string>& args) const {
  nlohmann::ordered_json d;
  d["version"] = kJsonFileVersion;
  d["start_time"] = start_time_;
  d["args"] = nlohmann::ordered_json::array();
  for (const auto& a : args) d["args"].push_back(clean_text(a));
  d["env"] = nlohmann::ordered_json::array();
  const Env env = Env::from_process();  // held: all() refers into it
  for (const auto& [k, v] : env.all())
    d["env"].push_back(clean_text(k) + "=" + (is_secret_name(k) ? hidden_value(v) : clean_text(v)));
  d["nccl_version"] = h_.nccl_code;
  nlohmann::ordered_json c;
  c["nthreads"] = h_.nthreads;
  c["ngpus"] = h_.ngpus;
  c["minimum_bytes"] = h_.min_bytes;
  c["maximum_bytes"] = h_.max_bytes;
  if (h_.step_factor > 1)
    c["step_factor"] = static_cast<std::uint64_t>(h_.step_factor);
  else
    c["step_bytes"] = h_.step_bytes;
  c["warmup_iters"] = h_.warmup;
  c["iterations"] = h_.iters;
  c["aggregated_iterations"] = h_.agg;
  c["validation"] = h_.check;
  c["graph"] = h_.graph;
  c["blocking_collectives"] = jbool(h_.blocking_mode != 0);
  c["per_iter_timing"] = jbool(per_iter_);
  c["per_iter_skip"] = skip_;
  c["parallel_init"] = jbool(false);
  c["devices"] = devices_;
  d["config"] = std::move(c);
  d["results"] = results_;
  d["out_of_bounds"] = {{"count", wrong}, {"okay", jbool(wrong == 0)}};
  d["average_bus_bandwidth"] = {{"bandwidth", jdouble(avg_busbw)}, {"okay", "unchecked"}};
  d["errors"] = nlohmann::ordered_json::array();
  d["gpudiag"] = gpudiag;
  d["end_time"] = now_text();
  return d;
}

std::optional<std::string> write_new_file(const std::string& path, const std::string& text,
                                          std::string& error) {
  std::string target = path;
  for (int n = 0;; ++n) {
    const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      std::size_t done = 0;
      while (done < text.size()) {
        const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          error = target + ": cannot write it: " + std::strerror(errno ? errno : EIO);
          ::close(fd);
          return std::nullopt;
        }
        done += static_cast<std::size_t>(w);
      }
      if (::close(fd) != 0) {
        error = target + ": cannot write it: " + std::strerror(errno);
        return std::nullopt;
      }
      return target;
    }
    if (errno != EEXIST || n >= 1000) {
      error = target + ": " + (errno == EEXIST ? "it and path.0 to path.999 exist"
                                                : std::string("not accessible: ") +
                                                      std::strerror(errno));
      return std::nullopt;
    }
    target = path + "." + std::to_string(n);
  }
}

}  // namespace gpudiag
