// What one node's launcher shares with the other nodes' under --stragglers,
// through the job's store: its ranks' arrivals since it last shared, so every
// launcher judges the whole job.
//
// The value under `stragglers/<round>/<node>` is text:
//   s NODE SERIAL FINAL HOST     the node, its latest batch (0 none yet), 1 once
//                                its ranks ended and every record is in a batch
//   g GROUP RANK,RANK,...        a group its ranks declared (global ranks)
//   b SERIAL                     a batch: the records that came after the one before
//   c LOCAL GROUP SEQ OP ARRIVAL_NS END_NS FORWARD_NS RUNQ_NS   one rank's arrival
//   d LOCAL GROUP SEQ OP CREATED_NS KERNEL_NS   one rank's NCCL kernel time
// times on that node's own clock (a reader never compares them raw with its
// own: judge.h places them). Only the last kKeptBatches batches are in the
// value, so a reader that misses a publication or two still gets every
// record, and the value stays bounded whatever the job's length: at most
// kMaxBatchRecords records a batch (more wait for the next batch, and past
// kMaxWaiting they are counted lost) and kMaxShareGroups groups.
//
// Another node's value is not trusted: its node must be the key's, its local
// ranks below the node's count, its records and groups as record.h checks a
// rank's, its host a short name of letters, digits, '-', '.' and '_', the
// whole at most kMaxShareBytes; a bad line is counted and skipped, a bad
// header refuses the value.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stragglers/record.h"

namespace gpudiag::stragglers {

inline constexpr int kKeptBatches = 3;
inline constexpr std::size_t kMaxBatchRecords = 1024;
inline constexpr std::size_t kMaxWaiting = 8 * kMaxBatchRecords;
inline constexpr std::size_t kMaxShareGroups = 64;
inline constexpr std::size_t kMaxShareBytes = 512 * 1024;

struct LocalRecord {
  int local = 0;
  Arrival arrival;
};

struct Batch {
  std::int64_t serial = 0;
  std::vector<LocalRecord> records;
};

struct Share {
  int node = 0;
  std::int64_t serial = 0;
  bool final = false;
  std::string host;
  std::vector<GroupDecl> groups;
  std::vector<Batch> batches;  ///< oldest first
  int invalid = 0;             ///< lines skipped
};

/// The records this node's ranks sent, waiting to be shared, and the
/// batches shared last.
class Outbox {
 public:
  void add(int local, const Arrival& a);
  void declare(const GroupDecl& g);
  /// Closes a batch of what came since the last one (none when nothing
  /// came) and returns the value to publish.
  std::string publish(int node, const std::string& host, bool final);
  /// Records that could not be shared (too many waiting).
  std::int64_t lost() const { return lost_; }

 private:
  std::deque<LocalRecord> waiting_;
  std::deque<Batch> kept_;
  std::vector<GroupDecl> groups_;
  std::int64_t serial_ = 0, lost_ = 0;
};

/// Another node's value, or nullopt when its header is not node `node`'s.
/// `nproc`: ranks a node; `world`: ranks in the job.
std::optional<Share> parse_share(std::string_view text, int node, int nproc, int world);

/// A host name as a label may carry it: letters, digits, '-', '.', '_', 1 to 64.
bool plain_host(std::string_view host);

}  // namespace gpudiag::stragglers
