#include "launch/options.h"

#include <algorithm>
#include <cerrno>
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

namespace {

int parse_int_flag(const std::string& flag, const std::string& text, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  long v = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
  if (text.empty() || !end || *end || errno || v < lo || v > hi)
    throw UsageError("launch: " + flag + " '" + text + "' is not a whole number from " +
                     std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<int>(v);
}

double parse_seconds(const std::string& what, const std::string& text) {
  char* end = nullptr;
  double v = text.empty() ? -1 : std::strtod(text.c_str(), &end);
  if (text.empty() || !end || *end || !std::isfinite(v) || v < 0 || v > 30 * 86400)
    throw UsageError("launch: " + what + " '" + text + "' is not a number of seconds",
                     "e.g. --rdzv-conf join_timeout=600,last_call_timeout=3");
  return v;
}

void validate_rendezvous(const LaunchOptions& o) {
  const auto& b = o.rdzv_backend;
  if (!b.empty() && b != "c10d" && b != "static" && b != "gpudiag")
    throw UsageError("launch: --rdzv-backend '" + b + "' is not supported",
                     "use c10d, static or gpudiag (all meet in gpudiag's own store)");
  if (o.standalone && (o.nnodes != 1 || o.min_nodes > 1))
    throw UsageError(
        "launch: --standalone runs one node, but --nnodes asks for " + std::to_string(o.nnodes),
        "drop --standalone, or --nnodes");
  if (o.standalone && !o.rdzv_endpoint.empty())
    throw UsageError("launch: --standalone picks its own local endpoint; --rdzv-endpoint " +
                         o.rdzv_endpoint + " contradicts it",
                     "drop one of the two");
  if (b == "static" && o.min_nodes > 0 && o.min_nodes < o.nnodes)
    throw UsageError("launch: --rdzv-backend static takes a fixed --nnodes, not a range",
                     "use --rdzv-backend c10d for --nnodes MIN:MAX");
  if (b == "static" && o.nnodes > 1 && !o.node_rank)
    throw UsageError("launch: --rdzv-backend static needs --node-rank on every node",
                     "give each node its --node-rank, or use --rdzv-backend c10d to have them "
                     "assigned");
  if (!o.rdzv_endpoint.empty()) parse_endpoint(o.rdzv_endpoint);
  if (o.rdzv_id.size() > 128 ||
      o.rdzv_id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                  "._-") != std::string::npos)
    throw UsageError("launch: --rdzv-id '" + o.rdzv_id +
                     "' may hold only letters, digits, '.', "
                     "'_' and '-' (at most 128)");
  if (o.join_timeout_s < 0 || o.last_call_s < 0)
    throw UsageError("launch: rendezvous timeouts must not be negative");
}

}  // namespace

int parse_nproc(const std::string& text, int gpus, int cpus) {
  if (text == "gpu") {
    if (gpus < 1)
      throw UsageError("launch: --nproc-per-node gpu: no GPU is visible on this host",
                       "check nvidia-smi and CUDA_VISIBLE_DEVICES, or give a number");
    return gpus;
  }
  if (text == "cpu") return cpus;
  if (text == "auto") return gpus > 0 ? gpus : cpus;
  if (text.empty() || text.find_first_not_of("0123456789-+") != std::string::npos)
    throw UsageError("launch: --nproc-per-node '" + text + "' is not a number, gpu, cpu or auto");
  // The range is validate()'s to check, with the same words as for a test's LaunchOptions.
  return parse_int_flag("--nproc-per-node", text, -1000000000, 1000000000);
}

void parse_nnodes(const std::string& text, LaunchOptions& o) {
  auto colon = text.find(':');
  if (colon == std::string::npos) {
    o.nnodes = parse_int_flag("--nnodes", text, -1000000000, 1000000000);  // range: validate()
    o.min_nodes = 0;
    return;
  }
  int lo = parse_int_flag("--nnodes MIN", text.substr(0, colon), 1, kMaxNodes);
  int hi = parse_int_flag("--nnodes MAX", text.substr(colon + 1), 1, kMaxNodes);
  if (lo > hi)
    throw UsageError("launch: --nnodes " + text + " has MIN above MAX",
                     "write MIN:MAX, e.g. --nnodes 1:4");
  o.nnodes = hi;
  o.min_nodes = lo == hi ? 0 : lo;
}

std::vector<int> parse_std_spec(const std::string& flag, const std::string& text, int nproc) {
  auto bad = [&]() {
    return UsageError(
        "launch: " + flag + " '" + text + "' is not 0-3 or LOCAL_RANK:0-3,...",
        "0 none, 1 stdout, 2 stderr, 3 both; e.g. " + flag + " 3 or " + flag + " 0:3,1:2");
  };
  std::vector<int> out(static_cast<std::size_t>(nproc), 0);
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '3') {
    std::fill(out.begin(), out.end(), text[0] - '0');
    return out;
  }
  for (const auto& item : split(text, ',')) {
    auto colon = item.find(':');
    if (colon == std::string::npos || item.size() != colon + 2 || item[colon + 1] < '0' ||
        item[colon + 1] > '3' || colon == 0 ||
        item.substr(0, colon).find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    int local = parse_int_flag(flag + " local rank", item.substr(0, colon), 0, kMaxProcPerNode);
    if (local >= nproc)
      throw UsageError("launch: " + flag + " names local rank " + std::to_string(local) +
                       ", but --nproc-per-node is " + std::to_string(nproc));
    out[static_cast<std::size_t>(local)] = item[colon + 1] - '0';
  }
  return out;
}

std::pair<std::string, int> parse_endpoint(const std::string& text) {
  std::string host = text, port;
  if (text.starts_with("[")) {  // [v6]:port
    auto close = text.find(']');
    if (close == std::string::npos)
      throw UsageError("launch: --rdzv-endpoint '" + text + "' has no ']'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':')
        throw UsageError("launch: --rdzv-endpoint '" + text + "' is not HOST[:PORT]");
      port = text.substr(close + 2);
    }
  } else if (auto colon = text.rfind(':'); colon != std::string::npos && text.find(':') == colon) {
    host = text.substr(0, colon), port = text.substr(colon + 1);
  }
  if (host.empty())
    throw UsageError("launch: --rdzv-endpoint '" + text + "' names no host",
                     "give HOST:PORT of the node that serves the rendezvous, e.g. node0:29400");
  // Port 0: a free port, on a single node (resolve_job picks it).
  int p = port.empty() ? kDefaultRdzvPort : parse_int_flag("--rdzv-endpoint port", port, 0, 65535);
  return {host, p};
}

std::vector<int> parse_local_ranks(const std::string& text, int nproc) {
  std::vector<int> out;
  for (const auto& item : split(text, ',')) {
    if (item.empty()) continue;
    const int r = parse_int_flag("--local-ranks-filter", item, 0, std::max(0, nproc - 1));
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  if (out.empty())
    throw UsageError("launch: --local-ranks-filter '" + text + "' names no local rank",
                     "e.g. --local-ranks-filter 0 (only local rank 0 on the console)");
  return out;
}

void parse_rdzv_conf(const std::string& text, LaunchOptions& o) {
  for (const auto& item : split(text, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    auto key = item.substr(0, eq);
    auto value = eq == std::string::npos ? std::string() : item.substr(eq + 1);
    if (key == "join_timeout")
      o.join_timeout_s = parse_seconds("--rdzv-conf join_timeout", value);
    else if (key == "last_call_timeout")
      o.last_call_s = parse_seconds("--rdzv-conf last_call_timeout", value);
    else if (key == "timeout" || key == "read_timeout" || key == "close_timeout" ||
             key == "is_host" || key == "store_type")
      continue;  // torchrun's knobs for its own store: gpudiag's store has its own deadlines
    else
      throw UsageError("launch: --rdzv-conf key '" + key + "' is not known",
                       "use join_timeout=S and last_call_timeout=S");
  }
}

Meeting meeting(const LaunchOptions& o) {
  if (o.standalone) return Meeting::alone;
  if (o.rdzv_backend == "static") return o.nnodes > 1 ? Meeting::by_hand : Meeting::alone;
  if (!o.rdzv_endpoint.empty() || o.min_nodes > 0) return Meeting::rendezvous;
  if (o.nnodes == 1) return Meeting::alone;
  return o.node_rank ? Meeting::by_hand : Meeting::rendezvous;
}

void validate(const LaunchOptions& o, const std::vector<std::string>& subcommands) {
  if (o.nproc_per_node < 1 || o.nproc_per_node > kMaxProcPerNode)
    throw UsageError("launch: --nproc-per-node must be between 1 and " +
                         std::to_string(kMaxProcPerNode) + ", got " +
                         std::to_string(o.nproc_per_node),
                     "give the number of processes (usually GPUs) for this node");
  if (o.nnodes < 1 || o.nnodes > kMaxNodes)
    throw UsageError("launch: --nnodes must be between 1 and " + std::to_string(kMaxNodes) +
                     ", got " + std::to_string(o.nnodes));
  if (o.min_nodes < 0 || o.min_nodes > o.nnodes)
    throw UsageError("launch: --nnodes MIN must be between 1 and MAX (" + std::to_string(o.nnodes) +
                     "), got " + std::to_string(o.min_nodes));
  if (o.node_rank && (*o.node_rank < 0 || *o.node_rank >= o.nnodes))
    throw UsageError("launch: --node-rank " + std::to_string(*o.node_rank) + " is outside [0, " +
                         std::to_string(o.nnodes) + ")",
                     "number the nodes 0 to " + std::to_string(o.nnodes - 1) +
                         " and give each its own --node-rank");
  if (o.master_port && (*o.master_port < 1 || *o.master_port > 65535))
    throw UsageError(
        "launch: --master-port " + std::to_string(*o.master_port) + " is not a TCP port",
        "use a free port between 1024 and 65535 (the same on every node)");
  validate_rendezvous(o);
  auto how = meeting(o);
  if (how != Meeting::alone && o.rdzv_endpoint.empty() && o.master_addr.empty())
    throw UsageError("launch: --nnodes " + std::to_string(o.nnodes) +
                         " needs --master-addr (or --rdzv-endpoint)",
                     "give the address of the node with --node-rank 0, reachable from every node");
  if (o.grace_s < 0 || o.kill_after_s < 0 || o.timeout_s < 0)
    throw UsageError("launch: --grace, --kill-after and --timeout must not be negative");
  if (o.max_restarts < 0 || o.max_restarts > 1000)
    throw UsageError("launch: --max-restarts must be between 0 and 1000, got " +
                     std::to_string(o.max_restarts));
  if (o.max_restarts > 0 && !o.no_gpudiag && how != Meeting::alone)
    throw UsageError("launch: --max-restarts with gpudiag ranks works on one node only",
                     "the other nodes' ranks cannot rejoin a store whose ranks were restarted; "
                     "run each node's check again instead");
  if (o.preflight && how != Meeting::rendezvous)
    throw UsageError("launch: --preflight leaves nodes out of a rendezvous's rounds, and this "
                     "job has none",
                     "give --rdzv-endpoint (and --nnodes MIN:MAX to let the job go on without "
                     "a node), or run gpudiag check on its own first");
  if (o.preflight_timeout_s < 1 || o.preflight_timeout_s > 3600)
    throw UsageError("launch: --preflight-timeout must be between 1 and 3600 seconds");
  if (!o.tee.empty() && o.tee.size() != static_cast<std::size_t>(o.nproc_per_node))
    throw UsageError("launch: --tee was read for another --nproc-per-node");
  if (!o.redirects.empty() && o.redirects.size() != static_cast<std::size_t>(o.nproc_per_node))
    throw UsageError("launch: --redirects was read for another --nproc-per-node");
  if (o.stragglers && !o.stack_hook)
    throw UsageError("launch: --stragglers is measured by the ranks' startup file, which "
                     "--no-stack-hook leaves out",
                     "drop one of the two");
  if (!o.prometheus.empty() && !o.stragglers)
    throw UsageError("launch: --prometheus writes the stragglers' textfile",
                     "add --stragglers, or drop --prometheus");
  validate_command(o, subcommands);
}

double effective_exit_timeout(const LaunchOptions& o) {
  if (o.exit_timeout_s >= 0) return o.exit_timeout_s;
  double child_timeout = 60;
  for (std::size_t i = 0; i < o.command.size(); ++i) {
    std::string value;
    if (o.command[i] == "--timeout" && i + 1 < o.command.size())
      value = o.command[i + 1];
    else if (o.command[i].rfind("--timeout=", 0) == 0)
      value = o.command[i].substr(10);
    if (value.empty()) continue;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end && *end == 0 && std::isfinite(v) && v > 0 && v < 1e6) child_timeout = v;
  }
  return child_timeout + 60;
}

}  // namespace gpudiag::launch
