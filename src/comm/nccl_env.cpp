// NCCL's environment variables and what gpudiag does about them (nccl_env.h).
// NCCL_COMM_BLOCKING is read as NCCL reads it (src/include/param.h
// NCCL_PARAM -> src/misc/param.cc ncclLoadParam: strtoll with base 0, so
// "1", "01" and "0x1" are all 1; src/init.cc envConfigOverride applies only
// 0 and 1).
#include "comm/nccl_env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace gpudiag {

namespace {

/// NCCL_COMM_BLOCKING's value as NCCL reads it; -1 when it does not override.
long long blocking_value(const std::string& v) {
  if (v.empty()) return -1;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), nullptr, 0);
  return errno ? -1 : n;
}

void set_env(const char* name, const char* value) {
  const int r = value ? ::setenv(name, value, 1) : ::unsetenv(name);
  if (r != 0)
    throw Error(ExitCode::internal, std::string(value ? "setenv " : "unsetenv ") + name +
                                        " failed: " + std::strerror(errno));
}

}  // namespace

std::vector<NcclEnvWarning> nccl_env_warnings(const Env& env) {
  std::vector<NcclEnvWarning> out;
  if (auto v = env.get("NCCL_COMM_BLOCKING"); v && blocking_value(*v) == 1)
    out.push_back({"NCCL_COMM_BLOCKING",
                   "NCCL_COMM_BLOCKING=" + *v +
                       " makes every NCCL communicator blocking whatever it asks, so a peer that "
                       "never comes hangs inside NCCL; gpudiag check, bench and sweep set it to 0 "
                       "for their own NCCL",
                   "unset NCCL_COMM_BLOCKING unless the job needs blocking communicators"});
  if (auto v = env.get("NCCL_COMM_ID"))
    out.push_back({"NCCL_COMM_ID",
                   "NCCL_COMM_ID=" + *v +
                       " puts the bootstrap root of every NCCL communicator at that host:port; "
                       "gpudiag check and bench honour it, gpudiag sweep clears it for its pair "
                       "communicators, which must never share one root",
                   "unset NCCL_COMM_ID unless the job creates one communicator at a time and "
                   "its rank 0 runs on that host"});
  return out;
}

std::vector<NcclEnvWarning> prepare_nccl_env(const Env& env, NcclEnvUse use) {
  set_env("NCCL_COMM_BLOCKING", "0");
  if (use == NcclEnvUse::sweep) set_env("NCCL_COMM_ID", nullptr);
  return nccl_env_warnings(env);
}

}  // namespace gpudiag
