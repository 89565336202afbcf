#include "launch/options.h"

#include <cmath>
#include <cstdlib>

#include <string>

#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::launch {

namespace {

std::string closest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& name : names) {
    auto d = edit_distance(word, name);
    if (d < best_distance) best_distance = d, best = name;
  }
  return best;
}

void validate_command(const LaunchOptions& o, const std::vector<std::string>& subcommands) {
  if (o.command.empty() || o.command.front().empty())
    throw UsageError("launch: no command after '--'",
                     o.no_gpudiag ? "gpudiag launch --no-gpudiag --nproc-per-node 2 -- hostname"
                                  : "gpudiag launch --nproc-per-node 2 -- check");
  if (o.no_gpudiag) return;
  const auto& word = o.command.front();
  if (word == "launch")
    throw UsageError("launch: 'launch' cannot run inside 'launch'",
                     "name the subcommand each rank runs, e.g. -- check");
  for (const auto& name : subcommands)
    if (word == name) return;
  std::vector<std::string> runnable;
  for (const auto& name : subcommands)
    if (name != "launch") runnable.push_back(name);
  auto guess = closest(word, runnable);
  throw UsageError(
      "launch: '" + word + "' is not a gpudiag subcommand" +
          (guess.empty() ? "" : " (did you mean '" + guess + "'?)"),
      "use one of " + join(runnable, ", ") + ", or --no-gpudiag to run another program");
}

}  // namespace

void validate(const LaunchOptions& o, const std::vector<std::string>& subcommands) {
  if (o.nproc_per_node < 1 || o.nproc_per_node > kMaxProcPerNode)
    throw UsageError("launch: --nproc-per-node must be between 1 and " +
                         std::to_string(kMaxProcPerNode) + ", got " +
                         std::to_string(o.nproc_per_node),
                     "give the number of processes (usually GPUs) for this node");
  if (o.nnodes < 1 || o.nnodes > kMaxNodes)
    throw UsageError("launch: --nnodes must be between 1 and " + std::to_string(kMaxNodes) +
                     ", got " + std::to_string(o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw UsageError("launch: --node-rank " + std::to_string(o.node_rank) + " is outside [0, " +
                         std::to_string(o.nnodes) + ")",
                     "number the nodes 0 to " + std::to_string(o.nnodes - 1) +
                         " and give each its own --node-rank");
  if (o.master_port && (*o.master_port < 1 || *o.master_port > 65535))
    throw UsageError(
        "launch: --master-port " + std::to_string(*o.master_port) + " is not a TCP port",
        "use a free port between 1024 and 65535 (the same on every node)");
  if (o.nnodes > 1 && o.master_addr.empty())
    throw UsageError("launch: --nnodes " + std::to_string(o.nnodes) + " needs --master-addr",
                     "give the address of the node with --node-rank 0, reachable from every node");
  if (o.grace_s < 0 || o.kill_after_s < 0 || o.timeout_s < 0)
    throw UsageError("launch: --grace, --kill-after and --timeout must not be negative");
  validate_command(o, subcommands);
}

double effective_exit_timeout(const LaunchOptions& o) {
  if (o.exit_timeout_s >= 0) return o.exit_timeout_s;
  double child_timeout = 60;
  for (std::size_t i = 0; i < o.command.size(); ++i) {
    std::string value;
    if (o.command[i] == "--timeout" && i + 1 < o.command.size()) value = o.command[i + 1];
    else if (o.command[i].rfind("--timeout=", 0) == 0) value = o.command[i].substr(10);
    if (value.empty()) continue;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end && *end == 0 && std::isfinite(v) && v > 0 && v < 1e6) child_timeout = v;
  }
  return child_timeout + 60;
}

}  // namespace gpudiag::launch
