// See job_settings.h. Every variable about where and how a job's ranks meet
// is read in this file; the messages for a malformed one name it and say
// what to set.
#include "settings/job_settings.h"

#include <algorithm>
#include <cctype>

#include "store/socket.h"
#include "store/store_limits.h"
#include "util/strings.h"
#include "world/host.h"

namespace gpudiag {

namespace {

std::string non_empty(const Env& env, const char* name) {
  auto v = env.get(name);
  return v ? *v : std::string();
}

int parse_port(const std::string& v, const char* name) {
  auto p = parse_int(v);
  if (!p || *p < 1 || *p > 65535)
    throw UsageError(std::string(name) + "='" + v + "' is not a TCP port",
                     std::string("set ") + name + " to a free port between 1024 and 65535");
  return static_cast<int>(*p);
}

/// A port every task of a SLURM step computes alike, away from the usual
/// ones and below Linux's ephemeral range (32768-60999 by default), where a
/// server that asked the kernel for any free port may already listen.
int slurm_port(const Env& env) {
  auto job = parse_int(env.get_or("SLURM_JOB_ID", "0")).value_or(0);
  auto step = parse_int(env.get_or("SLURM_STEP_ID", "0")).value_or(0);
  return 20000 + static_cast<int>(((job * 131 + step * 7) % 12000 + 12000) % 12000);
}

int tree_port(const Env& env, const char* name) {
  auto v = env.get(name);
  if (!v) return 0;
  auto p = storelimits::parse_bounded(*v, 1, 65534);
  if (!p)
    throw UsageError(std::string(name) + "='" + storelimits::store_text(*v, 32) +
                         "' is not a port (1-65534)",
                     "unset it, or give a free port for the node leaders' stores");
  return static_cast<int>(*p);
}

/// GPUDIAG_HOST_ADDR, else the local address the kernel routes through
/// towards MASTER_ADDR (so the ring uses the same network as the
/// rendezvous), else the host name.
std::string ring_address(const Env& env, const std::string& host) {
  if (auto a = env.get("GPUDIAG_HOST_ADDR")) return *a;
  if (auto m = env.get("MASTER_ADDR")) {
    auto ip = net::local_ip_towards(*m, 9);
    if (!ip.empty()) return ip;
  }
  return host;
}

}  // namespace

std::string slurm_first_host(const std::string& nodelist) {
  // First entry: up to a ',' outside brackets.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  auto open = first.find('[');
  if (open == std::string::npos) return first;
  auto close = first.find(']', open);
  if (close == std::string::npos) return {};
  std::string range = first.substr(open + 1, close - open - 1);
  range = range.substr(0, range.find(','));
  range = range.substr(0, range.find('-'));
  if (range.empty() || !std::all_of(range.begin(), range.end(), ::isdigit)) return {};
  return first.substr(0, open) + range + first.substr(close + 1);
}

StoreAddress read_store_address(const World& world, const Env& env) {
  auto addr = env.get("MASTER_ADDR");
  auto port = env.get("MASTER_PORT");
  if (addr && port) return {*addr, parse_port(*port, "MASTER_PORT"), "MASTER_ADDR/MASTER_PORT"};
  if (world.launcher == Launcher::slurm && !addr && !port) {
    auto list = env.get_or("SLURM_STEP_NODELIST", env.get_or("SLURM_JOB_NODELIST", ""));
    auto host = slurm_first_host(list);
    if (host.empty())
      throw UsageError("cannot find the first host of SLURM_STEP_NODELIST='" + list + "'",
                       "set MASTER_ADDR and MASTER_PORT");
    return {host, slurm_port(env), "the first host of the SLURM step and a port from its job id"};
  }
  throw UsageError(std::string(addr ? "MASTER_PORT" : "MASTER_ADDR") + " is not set, and " +
                       std::to_string(world.size) + " ranks from " + world.source +
                       " need it to meet",
                   "export MASTER_ADDR=<rank 0's host> MASTER_PORT=<a free port> on every rank, "
                   "or start them with gpudiag launch, torchrun or mpirun");
}

JobToken read_job_token(const Env& env) {
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

std::optional<JobSecret> read_job_secret(const Env& env) {
  if (auto s = non_empty(env, "GPUDIAG_SECRET"); !s.empty()) {
    if (s.size() > kMaxSecretBytes)
      throw UsageError("GPUDIAG_SECRET is " + std::to_string(s.size()) +
                           " bytes long; the store takes at most " +
                           std::to_string(kMaxSecretBytes),
                       "use a short random string, e.g. `openssl rand -hex 32`");
    return JobSecret{s, "GPUDIAG_SECRET"};
  }
  if (auto f = non_empty(env, "GPUDIAG_SECRET_FILE"); !f.empty())
    return read_secret_file(f, "GPUDIAG_SECRET_FILE");
  return std::nullopt;
}

TreeSettings read_tree_settings(const Env& env) {
  TreeSettings t;
  const std::string mode = env.get_or("GPUDIAG_TREE", "auto");
  if (mode != "auto" && mode != "on" && mode != "off")
    throw UsageError("GPUDIAG_TREE='" + storelimits::store_text(mode, 32) + "' is not auto, on or off",
                     "unset it (auto: node leaders from " + std::to_string(kAutoTreeRanks) +
                         " ranks), or set on or off");
  t.mode = mode == "on"    ? TreeSettings::Mode::on
           : mode == "off" ? TreeSettings::Mode::off
                           : TreeSettings::Mode::automatic;
  if (auto g = env.get("GPUDIAG_TREE_GROUP_NODES")) {
    auto v = storelimits::parse_bounded(*g, 2, 4096);
    if (!v)
      throw UsageError("GPUDIAG_TREE_GROUP_NODES='" + storelimits::store_text(*g, 32) +
                           "' is not a number of nodes (2-4096)",
                       "unset it (128 nodes under each second-level judge)");
    t.group_nodes = static_cast<int>(*v);
  }
  t.node_port = tree_port(env, "GPUDIAG_TREE_PORT");
  t.launch_leads = env.get_or("GPUDIAG_TREE_LEADER", "") == "launch";
  if (auto v = env.get("GPUDIAG_MPI_NODE_SIZE")) {
    auto n = storelimits::parse_bounded(*v, 1, 1 << 20);
    if (!n)
      throw UsageError("GPUDIAG_MPI_NODE_SIZE='" + storelimits::store_text(*v, 32) +
                           "' is not a number of ranks",
                       "unset it: MPI finds the ranks of each node itself");
    t.mpi_node_size = static_cast<int>(*n);
  }
  return t;
}

std::string read_history_dir(const Env& env, const std::string& option) {
  if (!option.empty()) return option;
  return non_empty(env, "GPUDIAG_HISTORY");
}

JobSettings read_job_settings(const Env& env, double timeout_s) {
  JobSettings s;
  s.world = discover_world(env);
  s.env = env;
  s.host = short_hostname();
  s.timeout_s = timeout_s;
  s.ring_address = ring_address(env, s.host);
  s.tree = Checked<TreeSettings>::from([&] { return read_tree_settings(env); });
  auto& st = s.store;
  st.address = Checked<StoreAddress>::from([&] { return read_store_address(s.world, env); });
  st.token = read_job_token(env);
  st.secret = Checked<std::optional<JobSecret>>::from([&] { return read_job_secret(env); });
  if (env.get_or("TORCHELASTIC_USE_AGENT_STORE", "") == "True") {
    st.server = StoreSettings::Server::torch_agent;
    st.torch_prefix = "gpudiag/" + env.get_or("TORCHELASTIC_RUN_ID", "run") + "/" +
                      env.get_or("TORCHELASTIC_RESTART_COUNT", "0") + "/";
    st.torch_by_launch = !env.get_or("GPUDIAG_LAUNCH_ID", "").empty();
  } else if (env.get_or("GPUDIAG_STORE", "") == "launcher") {
    st.server = StoreSettings::Server::launcher;
  }
  return s;
}

}  // namespace gpudiag
