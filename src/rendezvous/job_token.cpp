#include "rendezvous/job_token.h"

namespace gpudiag {

namespace {
std::string non_empty(const Env& env, const char* name) {
  auto v = env.get(name);
  return v ? *v : std::string();
}
}  // namespace

JobToken job_token(const Env& env) {
  if (auto t = non_empty(env, "GPUDIAG_TOKEN"); !t.empty()) return {t, "GPUDIAG_TOKEN"};
  if (auto job = non_empty(env, "SLURM_JOB_ID"); !job.empty()) {
    auto step = non_empty(env, "SLURM_STEP_ID");
    return {"slurm-" + job + (step.empty() ? "" : "." + step),
            "SLURM_JOB_ID=" + job + (step.empty() ? "" : " SLURM_STEP_ID=" + step)};
  }
  if (auto run = non_empty(env, "TORCHELASTIC_RUN_ID"); !run.empty())
    return {"torchelastic-" + run, "TORCHELASTIC_RUN_ID=" + run};
  return {"gpudiag-by-hand", "the default for ranks started by hand"};
}

}  // namespace gpudiag
