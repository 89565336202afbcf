// The job token: what keeps the ranks of one job from joining another job's
// store when two jobs share a host and a MASTER_PORT (a stale launcher, two
// by-hand runs, a port reused across SLURM jobs). It is not a secret, only a
// name every rank of a job derives the same way:
//
//   1. GPUDIAG_TOKEN, when set and non-empty (`gpudiag launch` exports a
//      random one to its children);
//   2. "slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID>" under SLURM (the step is left
//      out when SLURM_STEP_ID is unset);
//   3. "torchelastic-<TORCHELASTIC_RUN_ID>" under torchrun;
//   4. "gpudiag-by-hand" otherwise, so ranks started by hand meet as long as
//      nobody else uses the same MASTER_ADDR:MASTER_PORT.
#pragma once

#include <string>

#include "util/env.h"

namespace gpudiag {

struct JobToken {
  std::string value;
  /// Where it came from, for messages: "GPUDIAG_TOKEN", "SLURM_JOB_ID=123", ...
  std::string source;
};

JobToken job_token(const Env& env);

}  // namespace gpudiag
