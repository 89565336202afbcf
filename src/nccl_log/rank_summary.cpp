// Readers for the INFO messages that carry per-process facts (see rank_summary.h). Each reader
// looks at one message shape and returns false when the message is not of that shape.
#include "nccl_log/rank_summary.h"

#include <algorithm>
#include <cctype>

#include "util/strings.h"

namespace gpudiag::nccl_log {

namespace {

constexpr std::size_t kEvidenceCap = 400;

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t b = i;
    while (i < s.size() && s[i] != ' ') ++i;
    if (i > b) out.push_back(s.substr(b, i - b));
  }
  return out;
}

int leading_int(std::string_view s) {
  int v = 0;
  std::size_t i = 0;
  for (; i < s.size() && i < 9 && std::isdigit(static_cast<unsigned char>(s[i])); ++i)
    v = v * 10 + (s[i] - '0');
  return i ? v : -1;
}

/// Text after the first occurrence of `marker`, or nullopt.
std::optional<std::string_view> after(std::string_view s, std::string_view marker) {
  auto pos = s.find(marker);
  if (pos == std::string_view::npos) return std::nullopt;
  return trim(s.substr(pos + marker.size()));
}

bool read_version(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  if (!msg.starts_with("NCCL version ")) return false;
  auto w = words(msg);
  if (w.size() >= 3 && p.nccl_version.empty()) {
    p.nccl_version = std::string(w[2]);
    p.version_evidence = e;
  }
  return true;
}

bool read_bootstrap(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  std::optional<std::string_view> list;
  if (msg.starts_with("Bootstrap")) list = after(msg, "Using");
  // NCCL 2.0-2.3 named the bootstrap/socket interface "NET : Using interface eth0:...".
  if (!list && msg.starts_with("NET : Using interface")) list = after(msg, "interface");
  if (!list) return false;
  if (p.bootstrap.empty()) {
    p.bootstrap = parse_interfaces(*list);
    p.bootstrap_evidence = e;
  }
  return true;
}

bool read_socket_nics(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  if (!msg.starts_with("NET/Socket")) return false;
  auto list = after(msg, "Using");
  if (!list) return true;  // "NET/Socket : 1 interfaces found" and others
  p.socket_nics = parse_interfaces(*list);
  p.socket_evidence = e;
  return true;
}

bool read_network(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  for (std::string_view marker : {"Using network ", "Using internal Network "}) {
    if (!msg.starts_with(marker)) continue;
    p.network = std::string(trim(msg.substr(marker.size())));
    p.network_evidence = e;
    return true;
  }
  return false;
}

bool read_ib(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  if (!msg.starts_with("NET/IB")) return false;
  if (msg.find("No device found") != std::string_view::npos) {
    p.ib_absent = true;
    return true;
  }
  // "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:..." (2.4+) or
  // "NET/IB: [0] mlx4_0:2/RoCE" (2.2).
  auto list = after(msg, "Using");
  if (!list) {
    auto colon = msg.find(':');
    if (colon == std::string_view::npos) return true;
    if (msg.find("/IB", colon) == std::string_view::npos &&
        msg.find("/RoCE", colon) == std::string_view::npos)
      return true;
    list = trim(msg.substr(colon + 1));
  }
  auto text = list->substr(0, list->find(';'));
  std::vector<std::string> nics;
  for (auto w : words(text)) {
    if (w.starts_with("[")) {
      auto close = w.find(']');
      w = close == std::string_view::npos ? std::string_view{} : w.substr(close + 1);
    }
    if (w.find("/IB") != std::string_view::npos || w.find("/RoCE") != std::string_view::npos)
      nics.emplace_back(w);
  }
  if (!nics.empty()) {
    p.ib_nics = std::move(nics);
    p.ib_evidence = e;
  }
  return true;
}

bool read_plugin(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  auto set = [&](std::string value, bool external) {
    // An external plugin, once seen, wins over "not found" lines printed for other names.
    if (!external && !p.net_plugin.empty() && p.net_plugin != "internal") return;
    p.net_plugin = std::move(value);
    p.plugin_evidence = e;
  };
  if (auto path = after(msg, "Plugin Path :")) {
    set(std::string(*path), true);
    return true;
  }
  if (auto name = after(msg, "Loaded net plugin")) {
    set(std::string(*name), true);
    return true;
  }
  if (msg.starts_with("NET/Plugin")) {
    bool internal = msg.find("No plugin found") != std::string_view::npos ||
                    msg.find("Could not find") != std::string_view::npos ||
                    msg.find("internal") != std::string_view::npos ||
                    msg.find("cannot open") != std::string_view::npos;
    if (internal) set("internal", false);
    return true;
  }
  return false;
}

/// "NET/IB/0/GDRDMA" -> "NET/IB/GDRDMA": device numbers vary per channel, the kind does not.
std::string transport_label(std::string_view via) {
  if (via.find("shared memory") != std::string_view::npos) return "SHM/direct";
  std::vector<std::string> keep;
  for (const auto& part : split(via, '/')) {
    auto t = trim(part);
    if (t.empty() || std::isdigit(static_cast<unsigned char>(t[0]))) continue;
    keep.emplace_back(t);
  }
  return join(keep, "/");
}

bool read_transport(ProcessSummary& p, std::string_view msg) {
  if (!msg.starts_with("Channel ") && !msg.starts_with("Ring ")) return false;
  auto via = msg.find(" via ");
  auto colon = msg.find(" : ");
  if (via == std::string_view::npos || colon == std::string_view::npos || colon > via) return true;
  auto w = words(msg.substr(colon + 3, via - colon - 3));
  if (w.size() < 3 || w[1] != "->") return true;
  int from = leading_int(w[0]), to = leading_int(w[2]);
  if (from < 0 || to < 0) return true;
  bool receive = w.size() > 3 && w[3] == "[receive]";
  auto label = transport_label(trim(msg.substr(via + 5)));
  if (!label.empty()) p.transports[label].insert(receive ? from : to);
  return true;
}

bool read_comm(ProcessSummary& p, std::string_view msg) {
  auto pos = msg.find("comm 0x");
  if (pos == std::string_view::npos) return false;
  auto w = words(msg.substr(pos + 5));
  if (w.empty()) return false;
  Comm c;
  c.id = std::string(w[0]);
  for (std::size_t i = 1; i + 1 < w.size(); ++i) {
    auto key = w[i];
    int v = leading_int(w[i + 1]);
    if (key == "rank")
      c.rank = v;
    else if (key == "nranks" || key == "nRanks")
      c.nranks = v;
    else if (key == "nNodes")
      c.nnodes = v;
    else if (key == "localRanks")
      c.local_ranks = v;
    else if (key == "cudaDev")
      c.cuda_dev = v;
    else if (key == "busId")
      c.bus_id = std::string(w[i + 1]);
  }
  auto it = p.comms.find(c.id);
  if (it == p.comms.end()) {
    // Collective traces also name "comm 0x..." ("[nranks=2]"); only init lines say "rank N nranks
    // M".
    if (c.rank < 0 || c.nranks < 0) return false;
    it = p.comms.emplace(c.id, c).first;
  }
  Comm& have = it->second;
  if (have.nnodes < 0) have.nnodes = c.nnodes;
  if (have.local_ranks < 0) have.local_ranks = c.local_ranks;
  if (have.cuda_dev < 0) have.cuda_dev = c.cuda_dev;
  if (have.bus_id.empty()) have.bus_id = c.bus_id;
  have.started = true;
  if (msg.find("Init COMPLETE") != std::string_view::npos || msg.ends_with("- COMPLETE"))
    have.complete = true;
  if (msg.find("Abort COMPLETE") != std::string_view::npos ||
      msg.find("Destroy COMPLETE") != std::string_view::npos)
    have.aborted = true;
  return true;
}

bool read_legacy_rank(ProcessSummary& p, std::string_view msg) {
  auto w = words(msg);
  if (w.size() != 4 || w[0] != "rank" || w[2] != "nranks") return false;
  p.legacy_rank = leading_int(w[1]);
  p.legacy_nranks = leading_int(w[3]);
  return true;
}

bool read_env(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  auto pos = msg.find(" set by environment to ");
  if (!msg.starts_with("NCCL_") || pos == std::string_view::npos) return false;
  auto value = trim(msg.substr(pos + 23));
  if (value.ends_with('.')) value.remove_suffix(1);
  std::string key(msg.substr(0, pos));
  p.env[key] = std::string(value);
  p.env_evidence.emplace(key, e);
  return true;
}

void read_verbs(ProcessSummary& p, std::string_view msg, const Evidence& e) {
  if (msg.find("libibverbs") == std::string_view::npos) return;
  if (msg.find("Failed to open") == std::string_view::npos &&
      msg.find("Unable to open") == std::string_view::npos)
    return;
  if (!p.verbs_missing) p.verbs_evidence = e;
  p.verbs_missing = true;
}

}  // namespace

void absorb(ProcessSummary& p, const Line& line, const std::string& file, std::size_t lineno,
            std::string_view raw) {
  Evidence e{file, lineno, std::string(trim(raw).substr(0, kEvidenceCap))};
  if (++p.lines == 1) p.first_line = e;
  p.last_line = e;
  // JobBuilder lists the file first (in constant time); the search is for other callers.
  if ((p.files.empty() || p.files.back() != file) &&
      std::find(p.files.begin(), p.files.end(), file) == p.files.end())
    p.files.push_back(file);
  if (p.launcher_rank < 0) p.launcher_rank = line.launcher_rank;
  std::string_view msg = line.message;

  switch (line.level) {
    case Level::version:
      read_version(p, msg, e);
      return;
    case Level::warn:
      p.warnings.push_back({line, e, {}});
      p.open_warning[line.tid] = p.warnings.size() - 1;
      read_verbs(p, msg, e);
      return;
    case Level::trace:
    case Level::call:
      return;
    case Level::info:
      break;
  }
  if (auto step = parse_chain_step(msg)) {
    auto it = p.open_warning.find(line.tid);
    if (it != p.open_warning.end())
      p.warnings[it->second].chain.push_back(*step);
    else if (!p.warnings.empty())
      p.warnings.back().chain.push_back(*step);
    return;
  }
  read_verbs(p, msg, e);
  if (msg.starts_with("P2P is disabled between")) {
    if (p.p2p_disabled.size() < 8) p.p2p_disabled.push_back(e);
    return;
  }
  if (msg.starts_with("Call to connect returned")) {
    if (p.connect_retries.size() < 8) p.connect_retries.push_back(e);
    return;
  }
  read_version(p, msg, e) || read_bootstrap(p, msg, e) || read_socket_nics(p, msg, e) ||
      read_network(p, msg, e) || read_ib(p, msg, e) || read_plugin(p, msg, e) ||
      read_transport(p, msg) || read_comm(p, msg) || read_legacy_rank(p, msg) ||
      read_env(p, msg, e);
}

std::vector<Interface> parse_interfaces(std::string_view list) {
  std::vector<Interface> out;
  for (auto w : words(list)) {
    if (w.starts_with("[")) {
      auto close = w.find(']');
      if (close == std::string_view::npos) continue;
      w = w.substr(close + 1);
    }
    if (auto lt = w.rfind('<'); lt != std::string_view::npos) w = w.substr(0, lt);
    auto colon = w.find(':');
    if (w.empty() || colon == 0) continue;
    Interface i;
    i.name = std::string(w.substr(0, colon));
    if (colon != std::string_view::npos) i.address = std::string(w.substr(colon + 1));
    out.push_back(std::move(i));
  }
  return out;
}

bool is_loopback(const Interface& i) {
  return i.name == "lo" || i.address.starts_with("127.") || i.address == "::1";
}

bool is_container_bridge(const Interface& i) {
  for (std::string_view p : {"docker", "veth", "br-", "virbr", "cni", "flannel", "cali"})
    if (i.name.starts_with(p)) return true;
  return false;
}

int ProcessSummary::rank() const {
  const Comm* best = nullptr;
  for (const auto& [id, c] : comms)
    if (!best || c.nranks > best->nranks) best = &c;
  return best ? best->rank : legacy_rank;
}

int ProcessSummary::world_size() const {
  int n = legacy_nranks;
  for (const auto& [id, c] : comms) n = std::max(n, c.nranks);
  return n;
}

bool ProcessSummary::init_complete() const {
  if (comms.empty()) return false;
  return std::all_of(comms.begin(), comms.end(), [](const auto& kv) { return kv.second.complete; });
}

std::vector<int> ProcessSummary::ranks() const {
  std::set<int> out;
  int size = world_size();
  for (const auto& [id, c] : comms)
    if (c.nranks == size && c.rank >= 0) out.insert(c.rank);
  if (out.empty() && legacy_rank >= 0) out.insert(legacy_rank);
  return {out.begin(), out.end()};
}

std::string ProcessSummary::label() const {
  auto rs = ranks();
  std::string who;
  if (rs.size() == 1) {
    who = "rank " + std::to_string(rs.front());
  } else if (!rs.empty()) {
    std::vector<std::string> parts;
    for (int r : rs) parts.push_back(std::to_string(r));
    who = "ranks " + join(parts, ",");
  } else if (launcher_rank >= 0) {
    who = "launcher rank " + std::to_string(launcher_rank);
  }
  return who.empty() ? key : who + " (" + key + ")";
}

std::string ProcessSummary::network_kind() const {
  if (network.empty()) return {};
  if (network == "Socket") return "Socket";
  if (network.starts_with("IB")) {
    bool roce = !ib_nics.empty() && std::all_of(ib_nics.begin(), ib_nics.end(),
                                                [](auto& n) { return n.ends_with("/RoCE"); });
    std::string kind = roce ? "RoCE" : "InfiniBand";
    return network == "IB" ? "IB (" + kind + ")" : "plugin " + network + " (" + kind + ")";
  }
  return "plugin " + network;
}

bool ProcessSummary::uses_net() const {
  return std::any_of(transports.begin(), transports.end(),
                     [](const auto& kv) { return kv.first.starts_with("NET/"); });
}

}  // namespace gpudiag::nccl_log
