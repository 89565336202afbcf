// What both of the simulator's shapes share (simulator.h): a pool of threads
// over simulated ranks or nodes, the padded record of a simulated rank, and a
// forked child process that reports lines to its parent (the stores run in
// processes of their own, so each one's peak RSS and descriptors are its own).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checks/record.h"
#include "plane/plane.h"
#include "store/tcp_store_server.h"

namespace gpudiag::sim {

/// Runs fn(0..n-1) on `threads` threads.
void parallel_for(int n, int threads, const std::function<void(int)>& fn);

/// A simulated rank's record, padded to about `record_bytes` (a real one's
/// size), on host simnode<rank / per_node>, and a small fingerprint beyond
/// that (kernel, driver, NCCL, a setting, a NIC; ~180 bytes). With
/// `nccl_roots` > 0 it is on the NCCL backend with that plan, and the rank
/// that makes a root's id carries sim_root_id(rank). The ranks of node
/// `drift_node` run another GPU driver (a warning: the job goes on).
RankRecord sim_record(int rank, int size, int record_bytes, int nccl_roots = 0, int per_node = 8,
                      int drift_node = -1);

/// The start of the line every rank's report must have when node `node`
/// drifts, its ranks `ranks` (those that reported at the exchange):
/// "drift: simnode5 (ranks 40-47)".
std::string sim_drift_line(int node, const std::vector<int>& ranks);
/// Whether the fingerprint block of an exchange's review has a line that
/// starts with `line`. Says what it had instead on stderr (a few times).
bool sim_names_drift(const Gathered& g, const std::string& line, int rank);

/// An encoded record without its NCCL id and fingerprint (the check's
/// records after the exchange).
std::string after_exchange(const std::string& record);

/// The made-up NCCL unique id (256 hex digits) rank `rank` makes.
std::string sim_root_id(int rank);

/// Whether a rank's exchange digest gave it every root's id, as the check
/// assembles them (checks/nccl_root_ids.h): rank 0's record among `g`'s
/// records, the others in the review. Says why not on stderr (a few times).
bool sim_got_root_ids(const Gathered& g, const RankRecord& me);

/// This process's peak RSS in KiB.
long long peak_rss_kib();

/// Raises the soft descriptor limit to the hard one (20,000 on some hosts).
void raise_descriptor_limit();

/// A forked process running `body(out, control)`: it writes lines to `out`
/// and should end when `control` reads end-of-file (the parent's release()).
class Child {
 public:
  explicit Child(const std::function<void(int out, int control)>& body);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  /// The next line the child wrote; empty at its end.
  std::string read_line();
  /// Tells the child to finish (closes its control pipe).
  void release();
  /// Waits for the child to exit; true when it exited 0.
  bool wait();
  /// Ends the child at once (SIGKILL): the run failed elsewhere.
  void kill();

 private:
  pid_t pid_ = -1;
  int from_ = -1, control_ = -1;
};

void write_line(int fd, const std::string& line);
/// Blocks until the parent releases this child.
void wait_released(int control);

/// The processes simulating nodes meet here before each checkpoint's
/// leaders collect, as a job's nodes reach a checkpoint together: without
/// it one process runs seconds ahead of another, and the judges above them,
/// whose clocks start at their first child, name the late one's groups
/// missing. In memory shared across fork() (one counter); a process gone
/// leaves the others waiting at most `within_s`.
class StepBarrier {
 public:
  explicit StepBarrier(int parties);
  ~StepBarrier();
  StepBarrier(const StepBarrier&) = delete;
  StepBarrier& operator=(const StepBarrier&) = delete;
  /// Step `step` (0, 1, ...) of every party; throws past `within_s`.
  void arrive_and_wait(int step, double within_s = 600);

 private:
  int parties_;
  void* shared_ = nullptr;
};

/// A judge's store for the simulator: on 127.0.0.1, the tree's token
/// (sim_tree.h) and the run's secret, room for `clients` connections.
std::unique_ptr<TcpStoreServer> judge_store(const std::string& secret, int clients);

}  // namespace gpudiag::sim
