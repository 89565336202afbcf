#include "launch/job.h"

#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdio>
#include <random>

#include "launch/entry.h"
#include "settings/job_settings.h"
#include "store/socket.h"
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

bool is_agent_variable(const std::string& name) {
  return name.starts_with("TORCHELASTIC_") || name.starts_with("ROLE_");
}

}  // namespace

int pick_free_port() { return net::bound_port(net::listen_on("", 0).get()); }

JobInfo resolve_job(const LaunchOptions& o, const Env& env) {
  JobInfo job;
  job.nproc_per_node = o.nproc_per_node;
  job.nnodes = o.nnodes;
  job.min_nodes = min_nodes(o);
  job.rendezvous = meeting(o) == Meeting::rendezvous;
  job.node_rank = o.node_rank ? *o.node_rank : (job.rendezvous ? -1 : 0);
  job.max_restarts = o.max_restarts;
  job.role = o.role;
  job.report_node = o.report_node;
  if (!o.rdzv_id.empty()) job.run_id = o.rdzv_id;
  if (!o.rdzv_endpoint.empty()) {
    auto [host, port] = parse_endpoint(o.rdzv_endpoint);
    if (port == 0 && (o.nnodes != 1 || min_nodes(o) > 1))
      throw UsageError("launch: --rdzv-endpoint " + o.rdzv_endpoint +
                           ": port 0 (a free port) works on a single node only; the other nodes "
                           "could not know it",
                       "give every node the same HOST:PORT, e.g. " + host + ":29400");
    if (port == 0) {  // the single-node idiom: torchrun picks a free port, and so does this
      port = pick_free_port();
      spdlog::warn("launch: --rdzv-endpoint {}: the rendezvous is on port {}", o.rdzv_endpoint, port);
    }
    job.master_addr = host, job.master_port = port, job.port_given = true;
  } else {
    job.master_addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
    if (o.master_port)
      job.master_port = *o.master_port;
    else
      job.master_port = o.nnodes == 1 && !job.rendezvous ? pick_free_port() : kDefaultMultiNodePort;
    job.port_given = o.master_port.has_value() || job.rendezvous;
  }
  // One node: nobody else needs to agree, so a fresh random token unless one
  // is exported. Several nodes: the project's rule, which every node applies
  // to the same inputs (GPUDIAG_TOKEN, --rdzv-id, the SLURM job, the torchrun run).
  const JobToken exported = read_job_token(env);
  if (exported.source == "GPUDIAG_TOKEN")
    job.token = exported.value;
  else if (!o.rdzv_id.empty())
    job.token = "rdzv-" + o.rdzv_id;
  else if (o.nnodes == 1 && !job.rendezvous)
    job.token = random_hex(2);
  else
    job.token = exported.value;
  job.launch_id = random_hex(1);
  // Read here with the rest; refused only if the launcher leads a node (store_host.h).
  job.tree = Checked<TreeSettings>::from([&] { return read_tree_settings(env); });
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
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(job.max_restarts)},
  };
}

Env rank_environment(const Env& parent, const JobInfo& job, int local_rank) {
  Env env;
  for (const auto& [name, value] : parent.all())
    if (!is_agent_variable(name)) env.set(name, value);
  for (const auto& [name, value] : job.extra_env) env.set(name, value);
  for (auto& [name, value] : rank_variables(job, local_rank))
    env.set(std::move(name), std::move(value));
  if (job.torch_children)
    for (auto& [name, value] : torch_variables(job, local_rank, parent))
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
