// What one process's NCCL lines say about it: NCCL version, bootstrap interface, network and
// NICs, transports to each peer, communicators and whether their init completed, environment
// overrides, and its WARNs with their error chains.
//
// A process (host:pid) is the unit: with one GPU per process it is one rank; nccl-tests with
// -g N runs several ranks in one process, and its communicators list them. Facts are read from
// the INFO messages NCCL has printed since 2.0; each reader below handles the spellings of
// the versions it knows ("Bootstrap : Using" / "Bootstrap: Using", "Using network IB" /
// "Using internal Network IB", "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read" / "Ring 00 :
// 0 -> 1 via NET/IB/0").
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "nccl_log/line.h"

namespace gpudiag::nccl_log {

/// Where a fact was read: file, 1-based line number, the line as written (trimmed, capped).
struct Evidence {
  std::string file;
  std::size_t line = 0;
  std::string text;
};

/// A network interface NCCL chose: "eth0" with "10.0.0.1".
struct Interface {
  std::string name;
  std::string address;
};

/// One communicator as its "comm 0x..." lines describe it.
struct Comm {
  std::string id;  ///< "0x55d2c0a0"
  int rank = -1;
  int nranks = -1;
  int nnodes = -1;  ///< NCCL 2.12+ "nNodes"
  int local_ranks = -1;
  int cuda_dev = -1;
  std::string bus_id;
  bool started = false;   ///< "Init START" (NCCL 2.19+) or any line naming it
  bool complete = false;  ///< "Init COMPLETE"
  bool aborted = false;   ///< "Abort COMPLETE" / "Destroy COMPLETE"
};

/// A WARN line and the "-> N" chain steps that followed it on the same thread.
struct Warning {
  Line line;
  Evidence where;
  std::vector<ChainStep> chain;
};

/// Everything one process's lines say.
struct ProcessSummary {
  std::string key;  ///< "host:pid", or "FILE" for lines without a host part
  std::string host;
  long pid = -1;
  std::vector<std::string> files;
  int launcher_rank = -1;  ///< from a launcher prefix, -1 when none

  std::string nccl_version;  ///< "2.19.3+cuda12.3"
  Evidence version_evidence;
  std::vector<Interface> bootstrap;  ///< "Bootstrap : Using ..." (first is the one used)
  Evidence bootstrap_evidence;
  std::vector<Interface> socket_nics;  ///< "NET/Socket : Using ..."
  Evidence socket_evidence;
  std::string network;               ///< "IB", "Socket", "IBext_v8", "AWS Libfabric", ...
  Evidence network_evidence;         ///< the "Using network X" line
  std::vector<std::string> ib_nics;  ///< "mlx5_0:1/IB", "mlx5_bond_0:1/RoCE"
  Evidence ib_evidence;              ///< the "NET/IB : Using [0]mlx5_0:1/RoCE ..." line
  std::string net_plugin;            ///< "internal", or the plugin path / name
  Evidence plugin_evidence;
  bool ib_absent = false;      ///< "NET/IB : No device found."
  bool verbs_missing = false;  ///< "Failed to open libibverbs.so"
  Evidence verbs_evidence;

  /// Transport label ("P2P/IPC/read", "NET/IB/GDRDMA", "SHM/direct/direct") -> peer ranks.
  std::map<std::string, std::set<int>> transports;
  std::map<std::string, Comm> comms;         ///< by comm id
  int legacy_rank = -1, legacy_nranks = -1;  ///< NCCL 2.3 "rank 0 nranks 8" without a comm id
  std::map<std::string, std::string> env;  ///< "NCCL_SOCKET_IFNAME" -> "lo" ("set by environment")
  std::map<std::string, Evidence> env_evidence;  ///< where each of those was logged
  std::vector<Evidence> p2p_disabled;            ///< "P2P is disabled between connected GPUs ..."
  /// INFO "Call to connect returned Connection refused, retrying" lines (first few), kept
  /// because the WARN that follows them is often cut off in pasted logs.
  std::vector<Evidence> connect_retries;
  std::vector<Warning> warnings;
  std::map<long, std::size_t> open_warning;  ///< tid -> index of its latest WARN (for chains)

  std::size_t lines = 0;
  Evidence first_line, last_line;

  /// This process's rank in its largest communicator, -1 when no communicator was seen.
  int rank() const;
  /// Size of its largest communicator, -1 when unknown.
  int world_size() const;
  /// Its ranks in communicators of that size (several for one process driving several GPUs).
  std::vector<int> ranks() const;
  /// True when every communicator seen completed init and at least one did.
  bool init_complete() const;
  /// "rank 3 (node1:1234)", "launcher rank 3 (node1:1234)" or "node1:1234".
  std::string label() const;
  /// "IB (RoCE)", "IB (InfiniBand)", "Socket", "plugin IBext_v8"; empty when unknown.
  std::string network_kind() const;
  /// True when any transport goes over the network (NET/...).
  bool uses_net() const;
};

/// Feeds one parsed line (from `file`, line number `lineno`, raw text `raw`) into `p`.
void absorb(ProcessSummary& p, const Line& line, const std::string& file, std::size_t lineno,
            std::string_view raw);

/// Parses "Using [0]eth0:10.0.0.1<0> [1]ib0:10.1.0.1<0>" or "eth0:10.0.0.1<0>" lists.
std::vector<Interface> parse_interfaces(std::string_view list);
/// True for "lo" or a 127.x / ::1 address.
bool is_loopback(const Interface& i);
/// True for container bridges and virtual pairs: docker*, veth*, br-*, virbr*, cni*, flannel*.
bool is_container_bridge(const Interface& i);

}  // namespace gpudiag::nccl_log
