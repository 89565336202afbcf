// The sweep's rank loop as one class (run.h): run.cpp (the device, the
// exchange, the run) and run_round.cpp (each round) define it between them,
// with the record readers both use. Not for use outside them.
#pragma once

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "checks/backend_choice.h"
#include "checks/memory_checks.h"
#include "checks/test_hook.h"
#include "checks/verdict.h"
#include "checks/watchdog.h"
#include "gpu/cuda.h"
#include "hw/evidence.h"
#include "hw/node_verdict.h"
#include "report/status_line.h"
#include "sweep/compute_stage.h"
#include "sweep/pair_meter.h"
#include "sweep/run.h"
#include "sweep/tree_results.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/text.h"
#include "world/fingerprint.h"
#include "world/fingerprint_compare.h"
#include "world/gpu_choice.h"

namespace gpudiag::sweep::sweep_run {

using nlohmann::json;

constexpr std::uint64_t kGpuBytes = 64ull << 20, kHostBytes = 4ull << 20;
constexpr std::uint64_t kGpuMem = 256ull << 20, kHostMem = 16ull << 20;
constexpr std::size_t kMaxField = 512;  ///< a peer's endpoint, id or label

inline std::optional<json> parse(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  json j = json::parse(*s, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

inline std::string text_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > kMaxField)
    return {};
  return it->get<std::string>();
}

class SweepRun {
 public:
  SweepRun(const SweepOptions& o, CheckSetup& s, std::string advertise, std::string token)
      : o_(o),
        s_(s),
        plane_(*s.plane),
        advertise_(std::move(advertise)),
        token_(std::move(token)),
        watchdog_(s.host + "-" + std::to_string(s.world.local_rank)) {
    n_ = plane_.size();
    me_.rank = s.world.rank;
    me_.world_size = n_;
    me_.local_rank = s.world.local_rank;
    me_.host = s.host;
    me_.pid = static_cast<int>(getpid());
    me_.host_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));  // rates judged where not crowded
    me_.launcher = launcher_id(s.world.launcher);
    gone_.assign(n_, false);
    hook_ = TestHook::from_env(s.env, me_.rank);
  }

  SweepOutcome run();

 private:
  bool judge() const { return me_.rank == 0; }

  void device();

  /// The compute phase after the device's tests (compute_stage.cpp).
  void compute();

  void exchange();

  /// Under node leaders: rank 0 sends its plan (plan_) as its record, which
  /// every digest carries; false (and out_.error) when none came.
  bool receive_plan(bool first);

  /// Applies the judge's review; false (and out_.error) when there is none.
  bool read_review(bool judged, const std::string& review,
                   const std::optional<std::string>& aborted, bool first);

  void mark_gone(const std::vector<int>& missing) {
    for (int r : missing)
      if (r >= 0 && r < n_ && r != me_.rank) gone_[r] = true;
  }

  std::vector<int> live() const;

  int my_partner() const;

  void one_round();

  std::string judge_round(const Gathered& g, const std::vector<int>& missing_before);

  /// The judge's line per round on stderr: a sweep of minutes is not silent.
  void progress_line(const std::vector<PairResult>& results, double now, const Round& next);

  int count_excluded() const {
    int n = 0;
    for (const auto& v : planner_->verdicts()) n += v.state != NodeState::ok;
    return n;
  }

  static bool hostlist_ok(const std::string& h);

  const SweepOptions& o_;
  CheckSetup& s_;
  Plane& plane_;
  std::string advertise_, token_;
  int n_ = 0;
  RankRecord me_;
  SweepOutcome out_;
  struct Disarm {
    Watchdog& w;
    ~Disarm() { w.disarm(); }
  };
  static constexpr double kDeviceLimitS = 300;
  std::unique_ptr<PairMeter> meter_;
  PairSpec spec_;
  Deadline::Clock::time_point start_;
  double round_start_ = 0;
  std::optional<Planner> planner_;  ///< the judge's
  Layout layout_;
  Round round_;
  Watchdog watchdog_;
  std::vector<bool> gone_, skip_;
  TestHook hook_;
  Gathered last_peers_;  ///< this round's sweep-K-peers checkpoint, for the judge's notes
  bool tree_ = false;    ///< judged by node leaders (see the top of this file)
  std::string plan_;     ///< (rank 0, tree) the plan it sends next
  int plans_ = 0;

  /// The sweep's last checkpoint (hardware_stage.cpp): the node's hardware
  /// read again by the rank that read it in device(), and each node whose
  /// counters moved or whose kernel log shows a link that went down during
  /// the rounds FAILED with it and excluded.
  void finish();
  /// (the judge) Fails the nodes of `g`'s records that carry a finding.
  void fail_by_hardware(const Gathered& g);
  /// A count of nodes from rank 0 (untrusted text); -1 when it is not one.
  int read_count(const std::string& text) const;
  hw::HwSources hw_sources_;
  hw::HwEvidence hw_start_;     ///< what device() read, when this rank read it
  std::uint64_t hw_since_ = 0;  ///< the sweep's start in the kernel log's clock
  bool hw_reader_ = true;       ///< this rank read the node in device()
};

}  // namespace gpudiag::sweep::sweep_run
