// Rules for InfiniBand/RoCE verbs errors and GPU peer-to-peer failures.
//
// IB completion statuses are libibverbs' enum ibv_wc_status (infiniband/verbs.h); NCCL prints
// them as "with error N" (NCCL < 2.19) or "with status=N" (2.19+).
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "nccl_log/findings_internal.h"

namespace gpudiag::nccl_log::detail {

namespace {

int status_of(std::string_view m) {
  for (std::string_view key : {"with status=", "with error "}) {
    auto pos = m.find(key);
    if (pos == std::string_view::npos) continue;
    int v = 0;
    std::size_t i = pos + key.size(), n = 0;
    for (; i < m.size() && std::isdigit(static_cast<unsigned char>(m[i])) && n < 4; ++i, ++n)
      v = v * 10 + (m[i] - '0');
    if (n) return v;
  }
  return -1;
}

std::string status_name(int s) {
  switch (s) {
    case 1:
      return "IBV_WC_LOC_LEN_ERR: local length error";
    case 2:
      return "IBV_WC_LOC_QP_OP_ERR: local QP operation error";
    case 4:
      return "IBV_WC_LOC_PROT_ERR: local protection error";
    case 5:
      return "IBV_WC_WR_FLUSH_ERR: flushed after an earlier error";
    case 9:
      return "IBV_WC_REM_INV_REQ_ERR: remote invalid request";
    case 10:
      return "IBV_WC_REM_ACCESS_ERR: remote access error";
    case 11:
      return "IBV_WC_REM_OP_ERR: remote operation error";
    case 12:
      return "IBV_WC_RETRY_EXC_ERR: transport retry counter exceeded, a timeout";
    case 13:
      return "IBV_WC_RNR_RETRY_EXC_ERR: receiver not ready, retries exceeded";
    default:
      return "see enum ibv_wc_status";
  }
}

std::string status_remedy(int s, bool roce) {
  if (s == 12) {
    std::string gid = roce ? "on RoCE, set NCCL_IB_GID_INDEX to the RoCE v2 GID both sides can "
                             "route (`show_gids`; index 3 is common) — a wrong GID index is the "
                             "classic cause; "
                           : "";
    return "the two NICs could not reach each other before the retry timeout: " + gid +
           "check the link and fabric between these hosts with perftest (ib_write_bw) using "
           "the same HCA and GID index, make sure NCCL_IB_HCA selects ports cabled to the same "
           "fabric (on rail-optimized fabrics try NCCL_CROSS_NIC=0); raise NCCL_IB_TIMEOUT only "
           "when the fabric is merely congested";
  }
  if (s == 5)
    return "a flush error is a consequence: the queue pair had already failed; look for the "
           "first completion error (often status 12) or a peer that exited";
  if (s == 4 || s == 10)
    return "memory registration or access failed: check GPUDirect RDMA (nvidia-peermem loaded, "
           "or set NCCL_NET_GDR_LEVEL=LOC to rule it out), ACS on PCIe switches, and the "
           "locked-memory limit (ulimit -l unlimited)";
  return "check the fabric between these hosts with perftest (ib_write_bw) and the NIC "
         "counters (ibstat, ethtool -S)";
}

bool roce_job(const Job& job) {
  for (const auto& p : job.processes)
    for (const auto& n : p.ib_nics)
      if (n.ends_with("/RoCE")) return true;
  return false;
}

}  // namespace

/// NCCL_IB_GID_INDEX as each process logged it ("3", or "unset"), when the
/// ranks disagree; empty when they agree or none logged it.
std::string gid_index_disagreement(const Job& job) {
  std::map<std::string, std::set<std::string>> hosts_by_value;
  for (const auto& p : job.processes) {
    if (p.env.empty() && p.bootstrap.empty()) continue;  // logged no settings at all
    auto it = p.env.find("NCCL_IB_GID_INDEX");
    hosts_by_value[it == p.env.end() ? "unset" : it->second].insert(p.host.empty() ? p.key : p.host);
  }
  if (hosts_by_value.size() < 2) return {};
  std::string out;
  for (const auto& [value, hosts] : hosts_by_value) {
    if (!out.empty()) out += "; ";
    out += value + " on ";
    int shown = 0;
    for (const auto& h : hosts) {
      if (shown++ == 3) {
        out += " and " + std::to_string(hosts.size() - 3) + " more";
        break;
      }
      out += (shown > 1 ? ", " : "") + h;
    }
  }
  return out;
}

void rule_ib_completion(const Job& job, std::vector<Finding>& out) {
  Collector c;
  // The status shown and its peer come from one line: the first that is not
  // a flush (status 5 follows an earlier error), else the first line.
  int primary = -1;
  std::string primary_peer;
  bool gid_v4mapped = false;
  for (const auto& p : job.processes) {
    for (const auto& w : p.warnings) {
      std::string_view m = w.line.message;
      if (!contains(m, "Got completion")) continue;
      int s = status_of(m);
      if (primary < 0 || (primary == 5 && s != 5)) {
        primary = s;
        primary_peer = peer_address(m);
      }
      gid_v4mapped |= contains(m, "::ffff:");
      c.add(p, w.where, peer_address(m));
    }
  }
  if (c.empty()) return;
  std::string from = primary_peer.empty() ? "" : " from peer " + primary_peer;
  std::string title = "IB completion error status " + std::to_string(primary) + " (" +
                      status_name(primary) + ")" + from;
  std::string remedy = status_remedy(primary, roce_job(job) || gid_v4mapped);
  // The classic cause, when the logs show it: hosts on different GID indexes
  // cannot route to each other on RoCE (a retry timeout, status 12).
  if (const std::string gids = gid_index_disagreement(job); !gids.empty() && primary != 4 &&
                                                           primary != 10) {
    title += "; NCCL_IB_GID_INDEX differs between hosts (" + gids + "), the likely cause";
    remedy = "set NCCL_IB_GID_INDEX to the same RoCE v2 GID index on every host (`show_gids` "
             "lists them; 3 is common), then rerun; " + remedy;
  }
  c.emit(out, "ib-completion-error", Severity::problem, title, remedy);
}

void rule_ib_qp(const Job& job, std::vector<Finding>& out) {
  Collector connect, create;
  for (const auto& p : job.processes) {
    for (const auto& w : p.warnings) {
      std::string_view m = w.line.message;
      if (contains(m, "ibv_modify_qp"))
        connect.add(p, w.where);
      else if (contains(m, "ibv_create_qp") || contains(m, "ibv_reg_mr"))
        create.add(p, w.where);
    }
  }
  connect.emit(out, "ib-qp-setup", Severity::problem,
               "could not connect an IB/RoCE queue pair (ibv_modify_qp failed)",
               "the NIC could not address the peer: on RoCE set NCCL_IB_GID_INDEX to a RoCE v2 "
               "GID both sides can route (`show_gids`; 3 is common) and keep the traffic class "
               "consistent; on rail-optimized fabrics try NCCL_CROSS_NIC=0; check the ports in "
               "NCCL_IB_HCA are up (ibstat)");
  create.emit(out, "ib-qp-setup", Severity::problem,
              "could not create an IB queue pair or register memory",
              "raise the locked-memory limit (ulimit -l unlimited; docker --ulimit memlock=-1; "
              "in SLURM, PropagateResourceLimits) and check the HCA is usable (ibv_devinfo)");
}

void rule_p2p(const Job& job, std::vector<Finding>& out) {
  Collector failed, disabled, by_env;
  for (const auto& p : job.processes) {
    for (const auto& w : p.warnings) {
      std::string_view m = w.line.message;
      bool p2p_source = contains(w.line.source, "p2p");
      if (contains(m, "CUDA IPC") || contains(m, "peer access") ||
          contains(m, "NVLINK connected") || (p2p_source && contains(m, "Cuda failure")))
        failed.add(p, w.where);
    }
    if (!p.p2p_disabled.empty()) disabled.add(p, p.p2p_disabled.front());
    if (auto it = p.env.find("NCCL_P2P_DISABLE"); it != p.env.end() && it->second != "0")
      by_env.add(p, p.env_evidence.at("NCCL_P2P_DISABLE"), it->second);  // the line setting it
  }
  failed.emit(out, "p2p-failed", Severity::problem,
              "GPU peer-to-peer (CUDA IPC / peer access) between GPUs of one node failed",
              "GPUs could not map each other's memory: with IOMMU/VT-d or PCIe ACS enabled P2P "
              "does not work (disable ACS on the PCIe switches, boot with iommu=pt, see NCCL's "
              "troubleshooting guide), in VMs it is often unsupported, and CUDA IPC needs the "
              "ranks of a node in one container (or --ipc=host --pid=host); NCCL_P2P_DISABLE=1 "
              "works around it at some speed cost");
  disabled.emit(out, "p2p-disabled", Severity::note,
                "P2P is disabled between GPUs that are connected: traffic goes through host "
                "memory",
                "usually PCIe ACS or the IOMMU: check `nvidia-smi topo -p2p r` and "
                "`lspci -vvv | grep ACSCtl`, disable ACS or boot with iommu=pt on bare metal");
  by_env.emit(out, "p2p-disabled", Severity::note,
              "P2P between GPUs switched off by NCCL_P2P_DISABLE=" + by_env.first,
              "intra-node traffic goes through shared memory (slower); remove NCCL_P2P_DISABLE "
              "once ACS/IOMMU is fixed");
}

}  // namespace gpudiag::nccl_log::detail
