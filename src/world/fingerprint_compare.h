// Comparing the fingerprints of a job (fingerprint.h) and naming the odd ones
// out. Host fields (kernel, driver, ports, MTUs, /dev/shm, memlock) take one
// value per host, the lowest rank's, and are compared between hosts; rank
// fields (GPU model, libnccl, plugins, environment) are compared between
// every rank. Each field that differs becomes a Difference: the groups of
// ranks holding each value, ranks and hosts compressed ("ranks 0-7 [node1]:
// NCCL_SOCKET_IFNAME=eth0; ranks 8-15 [node2]: unset"). A differing NCCL
// version, or a net plugin found on some ranks and not on others, is broken
// (NCCL hangs or fails at init); every other difference is a warning. Values
// that are wrong on their own are Findings. The result travels in the
// judge's review as bounded JSON (comparison_json) and is rendered from it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "world/fingerprint.h"

namespace gpudiag {

struct RankPrint {
  int rank = 0;
  std::string host;
  const Fingerprint* print = nullptr;
};

struct ValueGroup {
  std::string value;
  std::vector<int> ranks;          ///< ascending
  std::vector<std::string> hosts;  ///< sorted, distinct
  /// [first, last] ranges, where a summary gave them (fingerprint_summary.h)
  /// instead of `ranks`: ascending, disjoint.
  std::vector<std::pair<int, int>> ranges;
  /// Ranks and hosts that hold the value but are not listed (a summary
  /// names a few); 0 in a flat comparison.
  std::size_t more_ranks = 0, more_hosts = 0;
  std::size_t rank_count() const;
  int first_rank() const;  ///< the lowest listed (a large number when none is)
};

struct Difference {
  std::string field;
  bool host_field = false;
  bool broken = false;
  std::vector<ValueGroup> groups;  ///< by lowest rank
  std::string remedy;
};

struct Finding {
  std::string what;  ///< "NCCL_SOCKET_IFNAME=lo names a loopback interface ..."
  std::string remedy;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
};

struct FingerprintComparison {
  int ranks = 0, hosts = 0, fields = 0;
  std::vector<Difference> differences;  ///< broken first, then by field
  std::vector<Finding> findings;
};

/// Ranks without a fingerprint (empty) are left out.
FingerprintComparison compare_fingerprints(const std::vector<RankPrint>& prints);

/// The rules every comparison shares (flat, or across a tree's groups):
/// whether a field is compared at all (some differ by design), whether
/// "unknown" is left out for it (read only where the driver allows), its
/// title in a line ("the GPU driver", "NCCL_ALGO"), and a difference's
/// severity and remedy. A field of one device (a NIC's MTU, an RDMA port's
/// state) is compared like for like: a host without that device is left out
/// of it (absent_is_silent), and the count of RDMA ports ("rdma.ports") says
/// when a host lacks one the others have.
bool compared_field(const std::string& key);
bool unknown_is_silent(const std::string& key);
bool absent_is_silent(const std::string& key);
std::string field_title(const std::string& field);
void classify_difference(Difference& d);

/// "0-7,9,12-15"
std::string compress_ranks(const std::vector<int>& ascending);
/// The same from [first, last] ranges.
std::string compress_ranges(const std::vector<std::pair<int, int>>& ascending);
/// "node1,node2 +3 hosts" (`more` hosts not listed are counted too)
std::string compress_hosts(const std::vector<std::string>& hosts, std::size_t more = 0);
/// "ranks 0-7 [node1]: NCCL_SOCKET_IFNAME=eth0"
std::string group_text(const std::string& field, const ValueGroup& g);
/// "the NCCL net plugin differs: ranks 0-1 [vm]: not found; ranks 2-3 [vm]: /x.so"
std::string difference_line(const Difference& d, std::size_t max_groups = 4);

/// "simnode5 (ranks 40-47): the GPU driver is 550.54.15, not 535.104.05 as on
/// 16376 other ranks": one line (the report prefixes "drift: ") per value
/// held by at most `max_hosts` hosts, all of them named, and by fewer ranks
/// than the value most ranks hold; at most `max_lines`.
std::vector<std::string> drift_lines(const Difference& d, std::size_t max_lines = 4,
                                     std::size_t max_hosts = 4);

/// The lines that stop the job at the exchange (broken differences).
std::vector<std::string> broken_lines(const FingerprintComparison& c);

/// Bounded for the review (a few differences and groups named, the rest counted).
nlohmann::json comparison_json(const FingerprintComparison& c);

/// The report's block, from comparison_json's output (or a review's copy of
/// it; anything malformed is skipped). "" for an empty or absent object.
std::string render_fingerprint(const nlohmann::json& j);

}  // namespace gpudiag
