// Rules across ranks: versions and choices that must agree, ranks that never finished init,
// and the first WARN of the whole run with its error chain.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "nccl_log/findings_internal.h"
#include "util/strings.h"

namespace gpudiag::nccl_log::detail {

namespace {

using Groups = std::map<std::string, std::vector<const ProcessSummary*>>;

std::string labels(const std::vector<const ProcessSummary*>& ps, std::size_t cap = 4) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ps.size() && i < cap; ++i) parts.push_back(ps[i]->label());
  if (ps.size() > cap) parts.push_back("and " + std::to_string(ps.size() - cap) + " more");
  return join(parts, ", ");
}

/// "2.19.3 on rank 0 (a:1), rank 1 (a:2); 2.14.3 on rank 4 (b:7)", largest group first (six
/// groups at most).
std::string describe(const Groups& groups) {
  std::vector<std::pair<std::string, const std::vector<const ProcessSummary*>*>> order;
  for (const auto& [value, ps] : groups) order.emplace_back(value, &ps);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->size() > b.second->size();
  });
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < order.size() && i < 6; ++i)
    parts.push_back(order[i].first + " on " + labels(*order[i].second));
  if (order.size() > 6) parts.push_back("and " + std::to_string(order.size() - 6) + " more values");
  return join(parts, "; ");
}

using Fact = std::function<Evidence(const ProcessSummary&)>;

/// Processes outside the largest group: the ones that disagree with the majority. With no
/// clear majority (a tie for largest) every process is named. The evidence is the line that
/// states each side's value (`evidence`): the odd ones out first, then one of the majority,
/// so the quoted lines show the disagreement itself.
void add_minority(const Groups& groups, Collector& c, const Fact& evidence) {
  std::size_t largest = 0, ties = 0;
  for (const auto& [v, ps] : groups) largest = std::max(largest, ps.size());
  for (const auto& [v, ps] : groups) ties += ps.size() == largest;
  const ProcessSummary* majority = nullptr;
  for (const auto& [v, ps] : groups) {
    if (ps.size() == largest && ties == 1) {
      majority = ps.front();
      continue;
    }
    for (const auto* p : ps) c.add(*p, evidence(*p));
  }
  if (!majority || c.empty()) return;
  Evidence e = evidence(*majority);
  if (e.text.empty()) return;
  if (c.evidence.size() >= 3) c.evidence.pop_back();
  c.evidence.push_back(std::move(e));
}

/// What a few well-known WARN texts mean, for the first-warn finding.
std::string hint_for(std::string_view message) {
  static const std::pair<const char*, const char*> hints[] = {
      {"CUDA driver version is insufficient",
       "no usable NVIDIA driver on that node, or one older than the CUDA runtime NCCL was built "
       "for: check `nvidia-smi` there"},
      {"no CUDA-capable device",
       "the process sees no GPU: check CUDA_VISIBLE_DEVICES and the "
       "launcher's GPU binding"},
      {"Duplicate GPU detected",
       "two ranks use the same GPU: give each rank its own device (LOCAL_RANK / "
       "CUDA_VISIBLE_DEVICES)"},
      {"has already checked in",
       "two processes claim the same rank: a stale RANK variable, or two jobs sharing one "
       "MASTER_ADDR:MASTER_PORT"},
      {"out of memory", "the GPU ran out of memory while NCCL allocated its buffers"},
  };
  for (const auto& [needle, hint] : hints)
    if (contains(message, needle)) return std::string(hint) + "; ";
  return {};
}

std::string base_version(const std::string& v) { return v.substr(0, v.find('+')); }

}  // namespace

void rule_version(const Job& job, std::vector<Finding>& out) {
  Groups groups;
  for (const auto& p : job.processes)
    if (!p.nccl_version.empty()) groups[base_version(p.nccl_version)].push_back(&p);
  Collector c;
  if (groups.size() > 1)
    add_minority(groups, c, [](const ProcessSummary& p) { return p.version_evidence; });
  for (const auto& p : job.processes)
    for (const auto& w : p.warnings)
      if (contains(w.line.message, "Mismatched NCCL version")) c.add(p, w.where);
  std::string title = groups.size() > 1 ? "NCCL version differs between ranks: " + describe(groups)
                                        : "NCCL reports ranks with different NCCL versions";
  c.emit(out, "version-mismatch", Severity::problem, title,
         "every rank must load the same libnccl: compare `python -c 'import torch; "
         "print(torch.cuda.nccl.version())'` (or ldd of the binary) on each node, and check "
         "LD_LIBRARY_PATH, LD_PRELOAD and the container image on the odd ones out");
}

void rule_disagree(const Job& job, std::vector<Finding>& out) {
  Groups nets, plugins;
  for (const auto& p : job.processes) {
    if (auto k = p.network_kind(); !k.empty()) nets[k].push_back(&p);
    if (!p.net_plugin.empty()) plugins[p.net_plugin].push_back(&p);
  }
  if (nets.size() > 1) {
    // The line that states the network: "Using network IB" / "Using network Socket"; when
    // every rank says the same name and only the NICs differ (RoCE or InfiniBand), the
    // "NET/IB : Using [0]mlx5_0:1/RoCE" line.
    bool one_name = true;
    for (const auto& [kind, ps] : nets)
      for (const auto* p : ps) one_name &= p->network == nets.begin()->second.front()->network;
    Collector c;
    add_minority(nets, c, [one_name](const ProcessSummary& p) {
      return one_name && !p.ib_evidence.text.empty() ? p.ib_evidence : p.network_evidence;
    });
    c.emit(out, "ranks-disagree", Severity::problem,
           "ranks use different networks: " + describe(nets),
           "the odd ranks could not use the network the others use: check their NET/IB lines "
           "(verbs library, /dev/infiniband, NIC state) and that NCCL_IB_DISABLE / NCCL_NET / "
           "NCCL_IB_HCA are set the same on every node");
  }
  if (plugins.size() > 1) {
    Collector c;
    add_minority(plugins, c, [](const ProcessSummary& p) { return p.plugin_evidence; });
    c.emit(out, "ranks-disagree", Severity::problem,
           "ranks load different NCCL net plugins: " + describe(plugins),
           "install the same net plugin (libnccl-net.so) on every node, or none, and set "
           "NCCL_NET_PLUGIN the same everywhere");
  }
  // Ranks on one host should bootstrap over the same interface (names differ across hosts).
  std::map<std::string, Groups> by_host;
  for (const auto& p : job.processes)
    if (!p.host.empty() && !p.bootstrap.empty())
      by_host[p.host][p.bootstrap.front().name].push_back(&p);
  for (const auto& [host, ifaces] : by_host) {
    if (ifaces.size() < 2) continue;
    Collector c;
    add_minority(ifaces, c, [](const ProcessSummary& p) { return p.bootstrap_evidence; });
    c.emit(out, "ranks-disagree", Severity::problem,
           "ranks on " + host + " bootstrap over different interfaces: " + describe(ifaces),
           "the ranks were started with different NCCL_SOCKET_IFNAME (or NCCL_SOCKET_FAMILY) "
           "settings: set them once for the whole job so every rank advertises an address the "
           "others reach");
  }
  // NCCL_* variables that some ranks set and others do not, or set differently. Ranks that
  // logged their bootstrap line would have logged their NCCL_* settings too (both are in
  // NCCL's default NCCL_DEBUG_SUBSYS).
  // First, in one pass over every process's settings, which keys differ: set by only some
  // ranks, or to several values. Only the first few are then grouped (one pass each), so
  // many distinct keys cannot make this quadratic.
  std::vector<const ProcessSummary*> with_env;
  std::map<std::string, std::map<std::string, std::size_t>> values_of;  // key -> value -> count
  for (const auto& p : job.processes) {
    if (p.env.empty() && p.bootstrap.empty()) continue;
    with_env.push_back(&p);
    for (const auto& [k, v] : p.env) ++values_of[k][v];
  }
  int reported = 0;
  for (const auto& [key, counts] : values_of) {
    std::size_t setting = 0;
    for (const auto& [v, n] : counts) setting += n;
    if (counts.size() < 2 && setting == with_env.size()) continue;  // the same everywhere
    if (reported++ >= 5) break;
    Groups values;
    for (const auto* p : with_env) {
      auto it = p->env.find(key);
      values[it == p->env.end() ? std::string("unset") : "=" + it->second].push_back(p);
    }
    // Who: the odd ones out. Evidence: the line that sets each value, one per value, the
    // minority's first (a rank that leaves it unset has no line to quote).
    Collector c;
    add_minority(values, c, [](const ProcessSummary&) { return Evidence{}; });
    c.evidence.clear();
    std::vector<std::pair<std::size_t, const Evidence*>> settings;  // (ranks with it, line)
    for (const auto& [value, ps] : values)
      for (const auto* p : ps)
        if (auto it = p->env_evidence.find(key); it != p->env_evidence.end()) {
          settings.emplace_back(ps.size(), &it->second);
          break;
        }
    std::stable_sort(settings.begin(), settings.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < settings.size() && i < 3; ++i)
      c.evidence.push_back(*settings[i].second);
    c.emit(out, "ranks-disagree", Severity::note,
           key + " differs between ranks: " + describe(values),
           "launchers pass environment variables only where told to (mpirun -x, srun "
           "--export, torchrun inherits the node's shell): set NCCL_* the same on every node");
  }
}

void rule_init_incomplete(const Job& job, std::vector<Finding>& out) {
  bool any_complete = false, any_comm = false;
  int world = -1;
  std::set<int> seen;
  for (const auto& p : job.processes) {
    any_complete |= p.init_complete();
    any_comm |= !p.comms.empty();
    world = std::max(world, p.world_size());
  }
  Collector c;
  for (const auto& p : job.processes) {
    for (const auto& [id, comm] : p.comms)
      if (comm.nranks == world && comm.rank >= 0) seen.insert(comm.rank);
    if (p.legacy_nranks == world && p.legacy_rank >= 0) seen.insert(p.legacy_rank);
    if (!p.init_complete()) c.add(p, p.last_line);
  }
  std::vector<std::string> named(c.who.begin(),
                                 c.who.begin() + std::min<std::size_t>(c.who.size(), 6));
  if (c.who.size() > named.size()) named.push_back("...");
  std::string title =
      any_complete ? std::to_string(c.who.size()) + " of " + std::to_string(job.processes.size()) +
                         " processes never reached Init COMPLETE: " + join(named, ", ")
      : any_comm ? "no rank reached Init COMPLETE"
                 : "no communicator init and no Init COMPLETE in these logs";
  c.emit(out, "init-incomplete", Severity::problem, title,
         "a rank stops before Init COMPLETE when it fails (see the first WARN) or waits for a "
         "peer that never arrives: check that every rank started, uses the same unique id / "
         "MASTER_ADDR and world size, and can reach the bootstrap interface of rank 0; the "
         "quoted line is where its log ends (logs cut short, or NCCL_DEBUG_SUBSYS without INIT, "
         "also end here)");

  if (world > 1 && !seen.empty() && static_cast<int>(seen.size()) < world) {
    std::vector<std::string> missing;
    for (int r = 0; r < world && missing.size() < 16; ++r)
      if (!seen.count(r)) missing.push_back(std::to_string(r));
    out.push_back({"ranks-missing",
                   Severity::note,
                   std::to_string(world - static_cast<int>(seen.size())) + " of " +
                       std::to_string(world) + " ranks have no communicator line in these logs: " +
                       join(missing, ",") + (world - seen.size() > missing.size() ? ",..." : ""),
                   {},
                   {},
                   "either their logs were not passed in (pass every rank's file or the run "
                   "directory) or those ranks never got as far as NCCL init",
                   {},
                   {},
                   {}});
  }
}

void rule_first_warn(const Job& job, std::vector<Finding>& out) {
  struct Candidate {
    const ProcessSummary* p;
    const Warning* w;
    std::size_t file;
  };
  std::vector<Candidate> all;
  for (const auto& p : job.processes)
    for (const auto& w : p.warnings)
      if (!contains(w.line.message, "libibverbs"))  // explained by verbs-missing, not fatal
        all.push_back({&p, &w, job.file_index(w.where.file)});
  if (all.empty()) return;
  bool stamped = std::all_of(all.begin(), all.end(),
                             [](const Candidate& c) { return !c.w->line.timestamp.empty(); });
  auto key = [&](const Candidate& c) {
    return std::make_tuple(stamped ? c.w->line.timestamp : std::string(), c.file, c.w->where.line);
  };
  const Candidate& first = *std::min_element(
      all.begin(), all.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });

  const Warning& w = *first.w;
  std::string title = "first WARN";
  if (!stamped && job.files.size() > 1) title += " (in file order: not every WARN has a timestamp)";
  title += ": " + w.line.message.substr(0, 200);

  std::string remedy;
  if (!w.chain.empty()) {
    std::vector<std::string> steps;
    for (const auto& s : w.chain) steps.push_back(s.where);
    int code = w.chain.back().code;
    remedy = "error chain " + join(steps, " -> ") + " returned " + std::to_string(code) + " (" +
             result_name(code) + ": " + result_meaning(code) + "); ";
  }
  remedy += hint_for(w.line.message);
  std::string explained;
  for (const auto& f : out) {
    if (f.id == "init-incomplete") continue;  // quotes where logs end, explains nothing
    for (const auto& e : f.evidence)
      if (e.file == w.where.file && e.line == w.where.line && explained.empty()) explained = f.id;
  }
  remedy += explained.empty()
                ? "the rest of the run's errors usually follow from this one: fix it first"
                : "explained by " + explained + " above";
  out.push_back(
      {"first-warn", Severity::problem, title, {first.p->label()}, {w.where}, remedy, {}, {}, {}});
}

}  // namespace gpudiag::nccl_log::detail
