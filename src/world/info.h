// What `gpudiag info` reports about this rank: the launcher found, the rank,
// the GPU it would use, and the versions and environment that matter when a
// job misbehaves. Gathered without initialising MPI or NCCL (libnccl is
// loaded to read its version and path, never initialised).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "util/env.h"

namespace gpudiag {

/// Environment variables worth showing: NCCL_*, CUDA_VISIBLE_DEVICES, MASTER_*,
/// the rank variables of every launcher, GPUDIAG_*.
bool is_relevant_env(const std::string& name);

/// Everything, as JSON (the text form is rendered from it).
/// `nccl_lib` is --nccl-lib ("" = GPUDIAG_NCCL_LIB, then the loader's search).
nlohmann::json collect_info(const Env& env, int forced_device = -1,
                            const std::string& nccl_lib = {});

/// The text block, one "  key  value" line each.
std::string render_info(const nlohmann::json& info);

}  // namespace gpudiag
