// What a job's NCCL logs mean: findings, each with the log lines that show it and what to try.
//
// Each rule is one small function over the Job (findings.cpp); it adds at most a few findings,
// naming the processes ("rank 3 (node1:1234)") it concerns. A "problem" is something that
// breaks or hangs a job; a "note" is worth knowing but not fatal (P2P disabled by ACS costs
// speed, not correctness). Rules and their ids:
//
//   loopback-interface   a multi-node job bootstraps or sends over lo / 127.0.0.1
//   container-interface  a multi-node job uses docker0 / veth* / virbr* addresses
//   verbs-missing        libibverbs could not be loaded, so NCCL fell back to sockets
//   connection-refused   connect to HOST<PORT> refused or aborted
//   connection-lost      a peer closed or reset a connection (it failed first)
//   network-unreachable  connect timed out / network unreachable (wrong interface or route)
//   shm-too-small        a /dev/shm segment could not be created (full or too small)
//   shm-not-shared       a peer's /dev/shm segment could not be opened (ranks do not share it)
//   ib-completion-error  an IB/RoCE work completion failed (status 12: retry timeout, ...)
//   ib-qp-setup          ibv_modify_qp / ibv_create_qp failed (GID index, routing, memlock)
//   p2p-failed           CUDA IPC / peer access between GPUs failed (ACS, IOMMU, containers)
//   p2p-disabled         NCCL found P2P disabled between connected GPUs (note)
//   version-mismatch     ranks load different NCCL versions
//   ranks-disagree       ranks chose different networks or net plugins; NCCL_* env differs
//   init-incomplete      a rank never reached "Init COMPLETE"
//   first-warn           the first WARN of the run and the error chain that followed it
//   torch-watchdog-timeout  PyTorch's watchdog timed a collective out; the rank behind, by
//                        the sequence numbers each rank logged (watchdog_rules.cpp)
//   torch-nccl-error     PyTorch's watchdog caught an NCCL or CUDA error and took ranks down
//   torch-watchdog-stuck the watchdog itself stopped (its heartbeat monitor ended the process)
//   nccl-diag            NCCL's diagnostics (NCCL_RUN_DIAGNOSTICS=1, 2.31+) reported an issue
//
// A finding that judges ranks against each other says whom it blames, whom it saw only
// waiting, and whom it could not tell about, apart (blamed, waiting, unknown); `who` lists them
// all.
#pragma once

#include <string>
#include <vector>

#include "nccl_log/job.h"

namespace gpudiag::nccl_log {

enum class Severity { problem, note };

/// "problem" / "note".
const char* severity_name(Severity s);

struct Finding {
  std::string id;  ///< stable id from the table above
  Severity severity = Severity::problem;
  std::string title;                 ///< one line: what is wrong, with the host/port/size it names
  std::vector<std::string> who;      ///< process labels it concerns
  std::vector<Evidence> evidence;    ///< the log lines that show it (a few)
  std::string remedy;                ///< what to try
  std::vector<std::string> blamed;   ///< the cause, where the rule can tell one
  std::vector<std::string> waiting;  ///< seen only waiting for others
  std::vector<std::string> unknown;  ///< concerned, but what they did cannot be told
};

/// Runs every rule over the job, problems first, in the order of the table above.
std::vector<Finding> find_problems(const Job& job);

/// True when any finding is a problem (the CLI's exit status 1).
bool has_problem(const std::vector<Finding>& findings);

}  // namespace gpudiag::nccl_log
