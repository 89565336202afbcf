// NCCL's environment variables that change what gpudiag's own NCCL does, in
// one place: the warning each one gets (printed by `gpudiag info`, by the
// check, bench and sweep, and as a finding of the fingerprint comparison),
// and what gpudiag does about it in its own processes before NCCL first
// reads it.
//
// NCCL_COMM_BLOCKING=1 makes every communicator blocking whatever its config
// asks, silently (NCCL's src/init.cc envConfigOverride): gpudiag's
// non-blocking creation, which a deadline can abandon, would hang inside
// NCCL when a peer never comes. NCCL reads it once a process (NCCL_PARAM),
// from the environment or from /etc/nccl.conf, ~/.nccl.conf or
// NCCL_CONF_FILE, whose lines NCCL sets only where the environment lacks
// them (src/misc/param.cc setEnvFile). So gpudiag sets NCCL_COMM_BLOCKING=0
// in its own environment (unsetting it would let a config file's line in),
// which keeps its communicators as it creates them: non-blocking.
//
// NCCL_COMM_ID=host:port makes every unique id that address and has rank 0's
// init start the bootstrap root there (src/bootstrap.cc
// bootstrapGetUniqueId, src/init.cc ncclCommInitRankDev). One communicator
// at a time is fine, and the check and bench honour it; the sweep's pair
// communicators must never share one root (pairs on different hosts would
// meet at the same host:port, and a pair that failed leaves its root
// listening there), so the sweep removes it from its environment.
#pragma once

#include <string>
#include <vector>

#include "util/env.h"

namespace gpudiag {

struct NcclEnvWarning {
  std::string variable;  ///< "NCCL_COMM_BLOCKING"
  std::string text;      ///< what it does, and what gpudiag does: one line
  std::string remedy;    ///< for the job's own runs
};

/// The warnings for `env`, one per variable that is set to matter.
std::vector<NcclEnvWarning> nccl_env_warnings(const Env& env);

/// Who runs NCCL in this process: the check and bench (one communicator at
/// a time), or the sweep (a communicator per pair).
enum class NcclEnvUse { check, sweep };

/// Sets this process's environment for its NCCL, before NCCL's first call:
/// NCCL_COMM_BLOCKING=0 always; for the sweep, NCCL_COMM_ID removed.
/// `env` is the snapshot the process was started with; returns its warnings.
std::vector<NcclEnvWarning> prepare_nccl_env(const Env& env, NcclEnvUse use);

}  // namespace gpudiag
