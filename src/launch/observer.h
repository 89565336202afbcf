// The launcher's seam for what it does not know about: a LaunchObserver
// hears when the job starts and when each child ends. A rendezvous store
// hosted by the launcher plugs in here (start the server in on_job_start,
// publish deaths in on_child_exit) without the launcher knowing stores exist.
//
// Both calls come from the launcher's supervising thread. on_job_start runs
// before any child exists and may adjust the job: take another master_port
// (when !port_given, e.g. the one a server bound on port 0) and add
// extra_env for the children (e.g. GPUDIAG_STORE=launcher). If it throws, no
// child is started and the error ends the launch. on_child_exit runs right after a child is reaped,
// before the launcher acts on it (so a death is published before the other ranks are stopped); an
// exception from it is logged and otherwise ignored, because supervising the remaining children
// matters more. stop_reason() is polled by the loop, for a verdict an observer reaches
// on its own thread. on_attempt_end() hears, after each attempt, what the launcher
// decided (restart_policy.h): restart it, or not, and why.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launch/exit_status.h"
#include "launch/job.h"
#include "launch/restart_policy.h"
#include "util/deadline.h"

namespace gpudiag {
class Store;
}

namespace gpudiag::launch {

struct ChildExit {
  int rank = 0;        ///< global rank
  int local_rank = 0;  ///< rank on this node
  pid_t pid = 0;
  ExitStatus status;
  /// The first child on this node that failed (non-zero exit or a signal)
  /// while the job was running normally: the one that made the launcher stop
  /// the others (the exit status is decided from every child; job_status.h).
  bool first_failure = false;
  /// The launcher had signalled it (after a failure, a signal or --timeout).
  bool stopped_by_launcher = false;
};

/// What this node's kernel log said when a rank failed first or the job
/// hung, as the launcher's report quotes it (hw/kernel_note.h).
struct KernelQuote {
  std::string at;                  ///< "failure" or "hang"
  int rank = -1;                   ///< the rank that failed first; -1 for a hang
  std::string host;                ///< this node
  std::vector<std::string> lines;  ///< "node: Xid 79 (...) ...: reboot the node", "OOM killer: ..."
  std::string error;               ///< why the log could not be read ("" when read)
};

class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  /// The job is resolved (master address, port, token) and no child runs yet.
  virtual void on_job_start(JobInfo& job) { (void)job; }
  /// A child has ended and been reaped.
  virtual void on_child_exit(const ChildExit& exit) { (void)exit; }
  /// Asked on every pass of the launcher's loop (at least every 500 ms): a
  /// reason to stop the whole job now, with exit status 2, found beside it
  /// (nodes numbered by hand that disagree on the job's shape). Must not block.
  virtual std::optional<std::string> stop_reason() { return std::nullopt; }
  /// Asked once when every child has ended and the job failed without a
  /// stop_reason(): the same question, answered now (it may take a second).
  virtual std::optional<std::string> final_stop_reason() { return stop_reason(); }
  /// An attempt has ended, its ranks all gone, and the launcher decided what comes next.
  virtual void on_attempt_end(const AttemptEnd& end) { (void)end; }
  /// --stragglers: the attempt's verdicts, as launch's --json carries them
  /// (stragglers/render.h), once its ranks have ended.
  virtual void on_stragglers(const nlohmann::json& report) { (void)report; }
  /// The node's kernel log near a first failure or a hang, as just quoted.
  virtual void on_kernel_quote(const KernelQuote& quote) { (void)quote; }

  // Where the ranks of every node are (stacks.h), through a store the
  // launchers share: the first node's launcher asks, the others answer.
  /// The first node's: asks every other launcher for its ranks' stacks;
  /// the request's number, 0 when there is nobody to ask.
  virtual int request_stacks() { return 0; }
  /// Whether this launcher answers another's requests (not the first node's).
  virtual bool answers_stacks() { return false; }
  /// The others': a request made since the last call, 0 none. Must not block
  /// for long (asked on every pass of the loop).
  virtual int stack_request_pending() { return 0; }
  /// Answers request `n` with this node's summary (encode_stacks()).
  virtual void publish_stacks(int n, const std::string& summary) { (void)n, (void)summary; }
  /// The other nodes' answers to `n` that came by `deadline`, and the node
  /// ranks that gave none.
  virtual std::vector<std::string> collect_stacks(int n, Deadline deadline,
                                                  std::vector<int>& silent) {
    (void)n, (void)deadline, (void)silent;
    return {};
  }

  /// The store every node's launcher shares in a job of several nodes
  /// (--stragglers' exchange of arrivals, stragglers/exchange.h); null on
  /// one node or without one. Asked on the launcher's thread once the job
  /// started; the store may then be used from another thread (its calls are
  /// serialised) until the attempt ends.
  virtual Store* shared_store() { return nullptr; }
};

}  // namespace gpudiag::launch
