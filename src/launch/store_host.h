// What ties gpudiag launch to the rendezvous store: on node 0 the launcher
// serves the job's store itself, so a rank that hangs or dies never takes the
// store down with it; on every node it publishes a rank's death (exit status
// or signal) into the store, so the other ranks stop waiting at once and name
// the dead rank instead of timing out.
//
// It also holds the job's secret: the one given (GPUDIAG_SECRET,
// GPUDIAG_SECRET_FILE, --secret-file), or on a single node a random one; it
// requires it of every store connection and exports it to the ranks as
// GPUDIAG_SECRET (in their environment, which other users cannot read; never
// on a command line). Several nodes cannot share a random one: without a
// given secret their store is unauthenticated, which is said once.
//
// Under a rendezvous (JobInfo::rendezvous) the store lives at the endpoint:
// the first launcher on the endpoint's host to bind its port serves it (a
// launcher that finds the port taken, or runs on another host, is a client),
// every launcher meets the others there (node_rendezvous.h), and the job's
// node rank and node count are what the rendezvous settled. With
// `gpudiag_ranks` false (--no-gpudiag) the ranks are told nothing of the
// store: node 0 picks a free port for the program's own MASTER_PORT and
// publishes it as `rdzv/master`. Nodes numbered by hand start their ranks at
// once; a thread compares their views beside the job and stop_reason() hands
// a disagreement to the launcher's loop. Under node leaders (GPUDIAG_TREE,
// docs/rendezvous.md) the launcher leads its node: it serves the node's store
// and runs the node's judge (and its group's and the root's where its node
// has them), and tells its ranks so (GPUDIAG_TREE_LEADER=launch).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <string>

#include "tree/tree_host.h"
#include "launch/node_rendezvous.h"
#include "launch/observer.h"
#include "launch/rounds.h"
#include "store/job_token.h"
#include "store/store.h"
#include "store/tcp_store_server.h"

namespace gpudiag::launch {

class StoreHost : public LaunchObserver {
 public:
  /// `secret`: the one given to the launcher, if any.
  /// `rounds`: the rounds of a rendezvous, kept across attempts (rounds.h);
  /// null: this attempt's own store and one round.
  explicit StoreHost(std::string host, std::optional<JobSecret> secret = std::nullopt,
                     bool gpudiag_ranks = true, RendezvousTimes times = {},
                     Rounds* rounds = nullptr)
      : host_(std::move(host)),
        secret_(std::move(secret)),
        gpudiag_ranks_(gpudiag_ranks),
        times_(times),
        rounds_(rounds) {}
  ~StoreHost() override;
  void on_job_start(JobInfo& job) override;
  void on_child_exit(const ChildExit& exit) override;
  /// Under rounds: a restart opens the next round, any other end ends the job.
  void on_attempt_end(const AttemptEnd& end) override;
  /// Nodes numbered by hand that disagree (found by the watcher thread).
  std::optional<std::string> stop_reason() override;
  /// The watcher's verdict, or else the views compared now, in one read.
  std::optional<std::string> final_stop_reason() override;
  int request_stacks() override;
  int stack_request_pending() override;
  bool answers_stacks() override { return job_.node_rank != 0 && job_.nnodes > 1; }
  void publish_stacks(int n, const std::string& summary) override;
  std::vector<std::string> collect_stacks(int n, Deadline deadline,
                                          std::vector<int>& silent) override;
  Store* shared_store() override { return job_.nnodes > 1 ? client() : nullptr; }

 private:
  /// A client of the job's store, connected on first use.
  Store* client();
  /// Serves the endpoint if this launcher binds its port first, connects,
  /// meets the other launchers and settles job.node_rank and job.nnodes.
  void meet(JobInfo& job);
  void start_server(JobInfo& job, int port);
  std::unique_ptr<TcpStoreServer> make_server(JobInfo& job, int port);
  /// This launcher serves the job's store (this attempt's, or the rounds').
  bool serving() const { return server_ || (rounds_ && rounds_->serving()); }
  /// The watcher thread's body under Meeting::by_hand (watch_hand_numbered()).
  void watch(JobInfo job);

  std::string host_;
  std::optional<JobSecret> secret_;
  bool gpudiag_ranks_ = true;
  int stacks_seen_ = 0;  ///< the last stack request answered (other nodes)
  Deadline::Clock::time_point next_stack_poll_{};
  RendezvousTimes times_;
  Rounds* rounds_ = nullptr;
  JobInfo job_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> client_;
  bool client_failed_ = false;
  bool by_hand_ = false;
  std::thread watcher_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::optional<std::string> verdict_;
  /// Under node leaders (tree/tree_host.h) this launcher leads its node: it
  /// serves the node's store and runs its judges. Declared last: it stops
  /// before the job's store it reports to.
  std::unique_ptr<TreeHost> tree_;
  int tree_node_port_ = 0;
  /// Under node leaders, the line to this node's own store, for deaths.
  std::unique_ptr<Store> node_client_;
  void lead_node(JobInfo& job);
};

/// "rank 3 [node2-1] (pid 4242) was killed by SIGKILL (seen by gpudiag launch on node2)".
std::string death_notice(const ChildExit& exit, const std::string& host);

}  // namespace gpudiag::launch
