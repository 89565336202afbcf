// The sweep's compute phase (compute_stage.h): the rank's run, in the device
// stage, and the judge's verdicts at the exchange.
#include "sweep/compute_stage.h"

#include "checks/verdict.h"
#include "compute/judge.h"
#include "compute/known.h"
#include "compute/run.h"
#include "sweep/sweep_run.h"
#include "util/strings.h"
#include "world/nvml_clocks.h"

namespace gpudiag::sweep {

ComputeStage judge_compute_stage(const std::vector<std::optional<RankRecord>>& table) {
  ComputeStage out;
  ComputeTallies tallies;
  for (const auto& r : table)
    if (r && r->ok) tally_compute(tallies, r->compute);
  bound_compute(tallies);
  // The known checksums judge the ranks whose exact key they list (compute/known.h).
  const KnownTable& known = known_checksums();
  if (!known.error.empty()) spdlog::warn("{}", known.error);
  // Each rank's record with its verdict, for the summary and the rates.
  std::vector<ComputeRecord> judged;
  std::vector<const RankRecord*> who;
  for (const auto& r : table) {
    if (!r || !r->ok || !r->compute.ran()) continue;
    ComputeRecord c = r->compute;
    const auto j = judge_compute(tallies, c);
    c.judged = j.judged;
    c.finding = j.finding;
    judge_known(known, tallies, c);
    if (c.failed()) out.failed.emplace_back(r->rank, rank_label(*r) + " failed in compute: " + c.finding);
    judged.push_back(std::move(c));
    who.push_back(&*r);
  }
  if (judged.empty()) return out;
  std::vector<ComputeRank> ranks;
  for (std::size_t i = 0; i < judged.size(); ++i)
    ranks.push_back({who[i]->rank, rank_label(*who[i]), &judged[i]});
  std::string why;
  const auto crowded = oversubscribed_hosts(table);
  if (judged.front().device != "gpu")
    why = "host backend";
  else if (!crowded.empty())
    why = "more ranks than CPUs on " + join(crowded, ", ");
  out.rates_judged = why.empty();
  out.line = compute_summary(ranks, out.rates_judged, why);
  if (!out.line.empty() && out.line.back() == '\n') out.line.pop_back();
  if (out.rates_judged)
    for (const auto& [rank, text] : slow_ranks(ranks)) out.slow.push_back(compute_slow_warning(text));
  return out;
}

namespace sweep_run {

void SweepRun::compute() {
  if (!o_.compute || !me_.ok) return;
  me_.phase = "compute";
  hook_.on_phase("compute");  // GPUDIAG_TEST_RAISE=SIGNAL@compute
  const bool gpu = me_.backend == "nccl";
  const double seconds =
      o_.compute_seconds >= 0 ? o_.compute_seconds : gpu ? kGpuComputeSeconds : kHostComputeSeconds;
  // The GEMMs wait on the GPU with a deadline; a call that cannot be given
  // one ends the rank with its status line, as the device stage's do.
  const double limit_s = 3 * seconds + 120;
  watchdog_.arm("compute", Deadline::after_seconds(limit_s));
  Disarm disarm{watchdog_};
  try {
    ComputeOptions c;
    c.gpu = gpu;
    c.seconds = seconds;
    c.flip = hook_.flips("compute");  // GPUDIAG_TEST_RAISE=FLIP@compute
    c.model = gpu ? me_.gpu_name : cpu_model();
    c.deadline = Deadline::after_seconds(limit_s);
    me_.compute = run_compute(c);
    if (gpu) me_.compute.clocks = read_gpu_clocks(load_nvml(), me_.gpu_bus_id);
    if (me_.compute.judged == "unstable") spdlog::warn("rank {}: {}", me_.rank, me_.compute.finding);
  } catch (const Error& e) {
    me_.fail("compute", e.one_line(), e.code() == ExitCode::timeout);
    spdlog::error("{} cannot take part in the sweep: {}", rank_label(me_), e.one_line());
  }
}

}  // namespace sweep_run

}  // namespace gpudiag::sweep
