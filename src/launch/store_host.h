// What ties gpudiag launch to the rendezvous store: on node 0 the launcher
// serves the job's store itself, so a rank that hangs or dies never takes the
// store down with it; on every node it publishes a rank's death (exit status
// or signal) into the store, so the other ranks stop waiting at once and name
// the dead rank instead of timing out.
#pragma once

#include <memory>
#include <string>

#include "launch/observer.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store_server.h"

namespace gpudiag::launch {

class StoreHost : public LaunchObserver {
 public:
  explicit StoreHost(std::string host) : host_(std::move(host)) {}
  void on_job_start(JobInfo& job) override;
  void on_child_exit(const ChildExit& exit) override;

 private:
  /// A client of the job's store, connected on first use.
  Store* client();

  std::string host_;
  JobInfo job_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> client_;
  bool client_failed_ = false;
};

/// "rank 3 [node2-1] (pid 4242) was killed by SIGKILL (seen by gpudiag launch on node2)".
std::string death_notice(const ChildExit& exit, const std::string& host);

}  // namespace gpudiag::launch
