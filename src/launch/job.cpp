#include "launch/job.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "launch/unique_fd.h"
#include "util/error.h"

namespace gpudiag::launch {

namespace {

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string random_hex(int words) {
  std::random_device device;  // /dev/urandom (or the CPU's generator) on Linux
  std::string out;
  for (int i = 0; i < words; ++i) {
    std::uint64_t v = (std::uint64_t{device()} << 32) | device();
    out += hex64(v);
  }
  return out;
}

/// FNV-1a, 64 bits: stable across builds and hosts, which is all derive_token needs.
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

bool is_agent_variable(const std::string& name) {
  return name.starts_with("TORCHELASTIC_") || name.starts_with("ROLE_");
}

}  // namespace

std::string derive_token(const std::string& master_addr, int master_port) {
  auto key = master_addr + ":" + std::to_string(master_port);
  return hex64(fnv1a("gpudiag-token/1a|" + key)) + hex64(fnv1a("gpudiag-token/1b|" + key));
}

int pick_free_port() {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid())
    throw Error(ExitCode::internal, std::string("launch: socket(): ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error(ExitCode::usage,
                std::string("launch: cannot find a free TCP port: ") + std::strerror(errno),
                "pass --master-port");
  return ntohs(addr.sin_port);
}

JobInfo resolve_job(const LaunchOptions& o, const Env& env) {
  JobInfo job;
  job.nproc_per_node = o.nproc_per_node;
  job.nnodes = o.nnodes;
  job.node_rank = o.node_rank;
  job.master_addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  if (o.master_port)
    job.master_port = *o.master_port;
  else
    job.master_port = o.nnodes == 1 ? pick_free_port() : kDefaultMultiNodePort;
  auto token = env.get_or("GPUDIAG_TOKEN", "");
  if (!token.empty())
    job.token = token;
  else if (o.nnodes == 1)
    job.token = random_hex(2);
  else
    job.token = derive_token(job.master_addr, job.master_port);
  job.launch_id = random_hex(1);
  return job;
}

std::vector<std::pair<std::string, std::string>> rank_variables(const JobInfo& job,
                                                                int local_rank) {
  return {
      {"RANK", std::to_string(job.rank_of(local_rank))},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(job.world_size())},
      {"LOCAL_WORLD_SIZE", std::to_string(job.nproc_per_node)},
      {"GROUP_RANK", std::to_string(job.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(job.nnodes)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"GPUDIAG_LAUNCH_ID", job.launch_id},
      {"GPUDIAG_TOKEN", job.token},
  };
}

Env rank_environment(const Env& parent, const JobInfo& job, int local_rank) {
  Env env;
  for (const auto& [name, value] : parent.all())
    if (!is_agent_variable(name)) env.set(name, value);
  for (auto& [name, value] : rank_variables(job, local_rank))
    env.set(std::move(name), std::move(value));
  return env;
}

std::vector<std::string> to_envp(const Env& env) {
  std::vector<std::string> out;
  out.reserve(env.all().size());
  for (const auto& [name, value] : env.all()) out.push_back(name + "=" + value);
  return out;
}

}  // namespace gpudiag::launch
