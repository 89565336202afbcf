#include "launch/store_host.h"

#include <spdlog/spdlog.h>

#include "rendezvous/store_plane.h"
#include "rendezvous/tcp_store_client.h"
#include "util/error.h"

namespace gpudiag::launch {

void StoreHost::on_job_start(JobInfo& job) {
  if (!secret_ && job.nnodes == 1) secret_ = JobSecret{random_secret(), "drawn by gpudiag launch"};
  if (!secret_)
    spdlog::warn(
        "launch: the job's store is unauthenticated: {} nodes cannot share a secret "
        "gpudiag launch draws; set GPUDIAG_SECRET (or --secret-file) to the same value "
        "on every node",
        job.nnodes);
  if (job.node_rank == 0) {
    TcpStoreServerOptions o;
    // A port the user did not choose is taken by the server itself (port 0),
    // which leaves no window for another process to grab it.
    o.port = job.port_given ? job.master_port : 0;
    o.token = job.token;
    if (secret_) o.secret = secret_->key;
    o.world_size = job.world_size();  // caps follow from it; refuses a too-low `ulimit -n`
    o.served_by = "gpudiag launch [" + host_ + "]";
    o.owned_keys = true;
    o.launcher_clients = true;  // every node's launcher reports its ranks' deaths
    server_ = std::make_unique<TcpStoreServer>(o);
    job.master_port = server_->port();
  }
  job.extra_env.emplace_back("GPUDIAG_STORE", "launcher");
  if (secret_) job.extra_env.emplace_back("GPUDIAG_SECRET", secret_->key);
  job_ = job;
}

Store* StoreHost::client() {
  if (!client_ && !client_failed_) {
    try {
      std::string host = job_.node_rank == 0 ? "127.0.0.1" : job_.master_addr;
      client_ = std::make_unique<TcpStoreClient>(host, job_.master_port, job_.token,
                                                 Deadline::after(std::chrono::seconds(3)),
                                                 secret_ ? secret_->key : std::string());
    } catch (const Error& e) {
      client_failed_ = true;
      spdlog::info("cannot publish rank deaths: {}", e.one_line());
    }
  }
  return client_.get();
}

void StoreHost::on_child_exit(const ChildExit& exit) {
  // Ranks the launcher stopped itself are not news; only an unexpected end is.
  if (exit.status.ok() || exit.stopped_by_launcher) return;
  if (auto* store = client())
    publish_failure(*store, death_notice(exit, host_), Deadline::after(std::chrono::seconds(3)),
                    FailureKind::died, exit.rank);
}

std::string death_notice(const ChildExit& exit, const std::string& host) {
  std::string how = exit.status.describe();
  if (exit.status.signaled) how = "was " + how;
  return "rank " + std::to_string(exit.rank) + " [" + host + "-" + std::to_string(exit.local_rank) +
         "] (pid " + std::to_string(exit.pid) + ") " + how + " (seen by gpudiag launch on " + host +
         ")";
}

}  // namespace gpudiag::launch
