// Rules that read single processes' lines: interfaces, verbs, sockets, /dev/shm, IB, P2P.
// Remedies follow NCCL's troubleshooting guide and what its maintainers answer on the
// corresponding GitHub issues (cited per fixture in tests/fixtures/nccl_logs/SOURCES.md).
#include "nccl_log/findings.h"

#include <algorithm>
#include <cctype>

#include "nccl_log/findings_internal.h"

namespace gpudiag::nccl_log {

using detail::Collector;
using detail::contains;

const char* severity_name(Severity s) { return s == Severity::problem ? "problem" : "note"; }

bool has_problem(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::problem; });
}

std::vector<Finding> find_problems(const Job& job) {
  using Rule = void (*)(const Job&, std::vector<Finding>&);
  static constexpr Rule kRules[] = {
      detail::rule_loopback,
      detail::rule_container_interface,
      detail::rule_verbs_missing,
      detail::rule_connection,
      detail::rule_shm,
      detail::rule_ib_completion,
      detail::rule_ib_qp,
      detail::rule_p2p,
      detail::rule_version,
      detail::rule_disagree,
      detail::rule_init_incomplete,
      detail::rule_torch_watchdog,
      detail::rule_nccl_diag,
      detail::rule_first_warn,
  };
  std::vector<Finding> out;
  for (Rule rule : kRules) rule(job, out);
  std::stable_partition(out.begin(), out.end(),
                        [](const Finding& f) { return f.severity == Severity::problem; });
  return out;
}

namespace detail {

void Collector::add(const ProcessSummary& p, const Evidence& e, std::string detail) {
  auto label = p.label();
  if (who_set.insert(label).second) who.push_back(std::move(label));
  if (evidence.size() < 3) evidence.push_back(e);
  if (first.empty()) first = std::move(detail);
}

void Collector::emit(std::vector<Finding>& out, std::string id, Severity severity,
                     std::string title, std::string remedy) const {
  if (empty()) return;
  out.push_back(
      {std::move(id), severity, std::move(title), who, evidence, std::move(remedy), {}, {}, {}});
}

std::string peer_address(std::string_view message) {
  for (auto lt = message.find('<'); lt != std::string_view::npos; lt = message.find('<', lt + 1)) {
    auto gt = message.find('>', lt);
    if (gt == std::string_view::npos) break;
    auto port = message.substr(lt + 1, gt - lt - 1);
    if (port.empty() || !std::all_of(port.begin(), port.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        }))
      continue;
    auto start = message.rfind(' ', lt);
    start = start == std::string_view::npos ? 0 : start + 1;
    if (start == lt) continue;
    return std::string(message.substr(start, lt - start)) + ":" + std::string(port);
  }
  return {};
}

namespace {

std::string describe(const Interface& i) {
  return i.address.empty() ? i.name : i.name + " (" + i.address + ")";
}

/// The interfaces a process moves bytes over: its bootstrap interface, plus its socket NICs
/// when the network is Socket.
std::vector<std::pair<Interface, Evidence>> used_interfaces(const ProcessSummary& p) {
  std::vector<std::pair<Interface, Evidence>> out;
  if (!p.bootstrap.empty()) out.emplace_back(p.bootstrap.front(), p.bootstrap_evidence);
  if (p.network == "Socket" || (p.network.empty() && p.uses_net()))
    for (const auto& nic : p.socket_nics) out.emplace_back(nic, p.socket_evidence);
  return out;
}

bool docker_default_bridge(const Interface& i) { return i.address.starts_with("172.17."); }

}  // namespace

void rule_loopback(const Job& job, std::vector<Finding>& out) {
  if (!job.multi_node()) return;
  Collector c;
  for (const auto& p : job.processes)
    for (const auto& [iface, e] : used_interfaces(p))
      if (is_loopback(iface)) c.add(p, e, describe(iface));
  c.emit(out, "loopback-interface", Severity::problem,
         "loopback interface " + c.first + " chosen in a job that spans nodes",
         "lo only reaches the same host: set NCCL_SOCKET_IFNAME to the interface that carries "
         "the node's routable address on every node (see `ip -br addr`), e.g. "
         "NCCL_SOCKET_IFNAME=eth0; an address configured on lo itself is not usable by NCCL");
}

void rule_container_interface(const Job& job, std::vector<Finding>& out) {
  if (!job.multi_node()) return;
  Collector c;
  for (const auto& p : job.processes)
    for (const auto& [iface, e] : used_interfaces(p))
      if (is_container_bridge(iface) || docker_default_bridge(iface)) c.add(p, e, describe(iface));
  c.emit(out, "container-interface", Severity::problem,
         "container bridge interface " + c.first + " used in a job that spans nodes",
         "docker0/veth*/virbr* addresses (and Docker's default 172.17.x bridge) exist only "
         "inside one host: set NCCL_SOCKET_IFNAME to the host's NIC (e.g. =ens5) or exclude "
         "them with NCCL_SOCKET_IFNAME=^docker,veth,virbr,lo; run containers with --network=host");
}

void rule_verbs_missing(const Job& job, std::vector<Finding>& out) {
  Collector c;
  for (const auto& p : job.processes)
    if (p.verbs_missing && p.network != "IB") c.add(p, p.verbs_evidence);
  bool nodes = job.multi_node();
  c.emit(out, "verbs-missing", nodes ? Severity::problem : Severity::note,
         nodes ? "libibverbs could not be loaded: traffic between nodes goes over TCP sockets, "
                 "not InfiniBand/RoCE"
               : "libibverbs could not be loaded: NCCL would use TCP sockets between nodes "
                 "(harmless within one node)",
         "install the verbs library where the ranks run (Debian/Ubuntu: libibverbs1 "
         "ibverbs-providers; RHEL: rdma-core; containers: in the image, with /dev/infiniband "
         "passed in); on nodes without IB/RoCE NICs set NCCL_IB_DISABLE=1 to skip the probe");
}

void rule_connection(const Job& job, std::vector<Finding>& out) {
  Collector refused, lost, unreachable;
  auto classify = [&](const ProcessSummary& p, std::string_view m, const Evidence& e) {
    if (contains(m, "ibv_")) return;  // rule_ib_qp
    auto peer = peer_address(m);
    if (contains(m, "Connection refused") || contains(m, "connection abort"))
      refused.add(p, e, peer);
    else if (contains(m, "closed by remote peer") || contains(m, "reset by peer"))
      lost.add(p, e, peer);
    else if (contains(m, "timed out") || contains(m, "unreachable") ||
             contains(m, "No route to host"))
      unreachable.add(p, e, peer);
  };
  for (const auto& p : job.processes) {
    for (const auto& w : p.warnings) classify(p, w.line.message, w.where);
    for (const auto& e : p.connect_retries) classify(p, e.text, e);
  }
  auto at = [](const std::string& peer) { return peer.empty() ? std::string() : " to " + peer; };
  refused.emit(out, "connection-refused", Severity::problem,
               "connection" + at(refused.first) + " refused or aborted",
               "nothing accepted the connection there: the peer exited or crashed earlier (its "
               "log shows why), or a firewall rejects the ports NCCL picks (allow TCP between "
               "the nodes), or NCCL advertised an interface the peer cannot reach (set "
               "NCCL_SOCKET_IFNAME to the interface the nodes share)");
  lost.emit(out, "connection-lost", Severity::problem,
            "connection" + at(lost.first) + " closed or reset by the peer",
            "the peer side failed or was killed first: read that host's log for its first WARN; "
            "ranks that disagree (NCCL version, NCCL_* settings) also drop connections");
  unreachable.emit(out, "network-unreachable", Severity::problem,
                   "connection" + at(unreachable.first) + " timed out or network unreachable",
                   "this address does not route between the nodes: NCCL picked the wrong "
                   "interface (container bridge, link-local, second NIC); set "
                   "NCCL_SOCKET_IFNAME to the interface the nodes reach each other on and check "
                   "with ping/nc between the hosts");
}

void rule_shm(const Job& job, std::vector<Finding>& out) {
  Collector create, attach;
  for (const auto& p : job.processes) {
    for (const auto& w : p.warnings) {
      std::string_view m = w.line.message;
      bool shm = contains(m, "shared memory segment") || contains(m, "/dev/shm") ||
                 contains(m, "posix_fallocate");
      if (!shm) continue;
      std::string size;
      if (auto pos = m.find("(size "); pos != std::string_view::npos)
        size = std::string(m.substr(pos + 6, m.find(')', pos) - pos - 6));
      if (contains(m, "attaching"))
        attach.add(p, w.where, size);
      else
        create.add(p, w.where, size);
    }
  }
  auto bytes = [](const std::string& s) {
    return s.empty() ? std::string() : " of " + s + " bytes";
  };
  create.emit(out, "shm-too-small", Severity::problem,
              "could not create a shared memory segment" + bytes(create.first) + " in /dev/shm",
              "/dev/shm is full or too small (Docker's default is 64 MiB): check `df -h "
              "/dev/shm` and remove stale /dev/shm/nccl-* files; run containers with "
              "--shm-size=1g or --ipc=host, in Kubernetes mount an emptyDir with medium: "
              "Memory at /dev/shm; NCCL_SHM_DISABLE=1 works around it at some speed cost");
  attach.emit(out, "shm-not-shared", Severity::problem,
              "could not open a peer's shared memory segment" + bytes(attach.first),
              "ranks on one node must see the same /dev/shm: run them in one container or with "
              "--ipc=host, and keep systemd from removing IPC objects (RemoveIPC=no in "
              "logind.conf); NCCL_SHM_DISABLE=1 works around it");
}

}  // namespace detail
}  // namespace gpudiag::nccl_log
