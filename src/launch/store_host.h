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
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "launch/observer.h"
#include "rendezvous/job_token.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store_server.h"

namespace gpudiag::launch {

class StoreHost : public LaunchObserver {
 public:
  /// `secret`: the one given to the launcher, if any.
  explicit StoreHost(std::string host, std::optional<JobSecret> secret = std::nullopt)
      : host_(std::move(host)), secret_(std::move(secret)) {}
  void on_job_start(JobInfo& job) override;
  void on_child_exit(const ChildExit& exit) override;

 private:
  /// A client of the job's store, connected on first use.
  Store* client();

  std::string host_;
  std::optional<JobSecret> secret_;
  JobInfo job_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> client_;
  bool client_failed_ = false;
};

/// "rank 3 [node2-1] (pid 4242) was killed by SIGKILL (seen by gpudiag launch on node2)".
std::string death_notice(const ChildExit& exit, const std::string& host);

}  // namespace gpudiag::launch
