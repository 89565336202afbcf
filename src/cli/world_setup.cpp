#include "cli/world_setup.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "checks/tree_review.h"
#include "sweep/tree_results.h"
#include "checks/watchdog.h"
#include "store/socket.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "report/job_report.h"
#include "report/rank_status.h"
#include "util/error.h"

namespace gpudiag::cli {

/// Joins the job through node leaders (tree_host.h): local rank 0 joins the
/// job's store (rank 0 serves it, as in a flat job) and runs its node's
/// store and judges; every rank joins its node's store.
void join_tree(Job& job, const TreePlan& tree, const JobSettings& s) {
  const auto& w = job.setup.world;
  const double timeout_s = s.timeout_s;
  auto deadline = Deadline::after_seconds(timeout_s);
  const auto& token = s.store.token;
  const auto& secret = s.store.secret.get();
  const std::string key = secret ? secret->key : std::string();
  // gpudiag launch leads its node itself; otherwise local rank 0 does.
  const bool launch_leads = s.tree.get().launch_leads;
  if (w.local_rank == 0 && !launch_leads) {
    job.store = join_store(w, s.store, deadline, /*as_leader=*/true, &tree.layout);
    spdlog::info("{}", job.store.how);
    TreeConnect c;
    c.token = token.value;
    c.secret = key;
    c.root = [again = job.store.connect_again, timeout_s](std::uint32_t claim) {
      return again(Deadline::after_seconds(timeout_s), claim);
    };
    c.address = s.ring_address;
    c.host = job.setup.host;
    c.timeout_s = timeout_s;
    c.reviewer = [n = w.size] { return sweep::job_reviewer(n); };
    job.tree = std::make_unique<TreeHost>(tree, std::move(c));
  }
  if (!secret)
    job.setup.store_unauthenticated = job.store.unauthenticated_why.empty()
                                          ? "no job secret"
                                          : job.store.unauthenticated_why;
  std::unique_ptr<TcpStoreClient> client;
  try {
    client = std::make_unique<TcpStoreClient>("127.0.0.1", tree.node_port, token.value, deadline,
                                              key, static_cast<std::uint32_t>(w.rank));
  } catch (const Error& e) {
    if (e.code() != ExitCode::timeout && e.code() != ExitCode::broken) throw;
    throw Error(e.code(),
                "rank " + std::to_string(w.rank) + " cannot reach the leader of " +
                    tree.layout.node_label(tree.node) + " (" +
                    (launch_leads ? "gpudiag launch" : "local rank 0") + " of this host, " + tree.why +
                    "), which serves the node's store at 127.0.0.1:" +
                    std::to_string(tree.node_port) + ": " + e.what(),
                "look at local rank 0's output on this host: it stopped, or never started; "
                "GPUDIAG_TREE=off runs the job with one store");
  }
  StorePlaneIdentity id{w.rank, w.size, w.local_rank, job.setup.host, getpid(),
                        "the leader of " + tree.layout.node_label(tree.node) +
                            (launch_leads ? " (gpudiag launch)" : " (local rank 0)")};
  id.tree = true;
  id.timeout_s = timeout_s;
  std::tie(id.node_first, id.node_last) = tree.layout.ranks_of_node(tree.node);
  // The levels above decide after their own waits: up to three of them.
  id.judge_grace = std::chrono::milliseconds(static_cast<long>((3 * timeout_s + 10) * 1000));
  spdlog::info("rank {}: meeting the job through {} ({}; {})", w.rank, id.served_by, tree.why,
               client->address());
  job.plane = make_store_plane(std::move(client), id, deadline);
  job.transport = make_tcp_transport(s.ring_address, token.value);
}

Job join_job(const JobSettings& s, bool allow_tree, bool mpi_tree) {
  Job job;
  const double timeout_s = s.timeout_s;
  job.setup.world = s.world;
  job.setup.env = s.env;
  job.setup.host = s.host;
  auto& w = job.setup.world;
  if (w.mpi_launched()) {
    // MPI_Init waits for every rank of the job and cannot time out: a rank
    // that never started, or is stopped before or inside it, would hang the
    // whole job without a word. The watchdog says so and ends this rank.
    Watchdog watchdog(job.setup.host + "-" + std::to_string(w.local_rank));
    watchdog.arm("MPI_Init", Deadline::after_seconds(timeout_s),
                 "MPI_Init waits for every rank: one of the " + std::to_string(w.size) +
                     " never started or is stopped; try: check that " + launcher_name(w.launcher) +
                     " started every rank (ps on each node) and read the launcher's own errors");
    job.mpi = std::make_unique<MpiSession>();
    watchdog.disarm();
    if (job.mpi->rank() != w.rank || job.mpi->size() != w.size)
      throw UsageError("MPI says rank " + std::to_string(job.mpi->rank()) + "/" +
                       std::to_string(job.mpi->size()) + " but " + w.source + " says " +
                       std::to_string(w.rank) + "/" + std::to_string(w.size));
    job.plane = allow_tree && mpi_tree && mpi_tree_wanted(w, s.tree.get())
                    ? make_mpi_tree_plane(*job.mpi, s.tree.get().mpi_node_size,
                                          tree_group_nodes(s.tree.get()),
                                          std::make_unique<CheckTreeReviewer>())
                    : make_mpi_plane(*job.mpi);
    job.transport = make_mpi_transport(*job.mpi);
    job.setup.mpi_version = mpi_library_version();
  } else if (w.size == 1) {
    job.plane = make_single_plane();
    job.transport = make_self_transport();
  } else if (auto tree = allow_tree ? plan_tree(w, s.tree.get(), s.store.address.get().port)
                                    : std::nullopt) {
    join_tree(job, *tree, s);
  } else {
    auto deadline = Deadline::after_seconds(timeout_s);
    job.store = join_store(w, s.store, deadline);
    spdlog::info("{}", job.store.how);
    if (!job.store.authenticated)
      job.setup.store_unauthenticated = job.store.unauthenticated_why.empty()
                                            ? "no job secret"
                                            : job.store.unauthenticated_why;
    StorePlaneIdentity id{w.rank,   w.size,   w.local_rank, job.setup.host,
                          getpid(), job.store.served_by};
    id.timeout_s = timeout_s;
    job.plane = make_store_plane(std::move(job.store.store), id, deadline);
    job.transport = make_tcp_transport(s.ring_address, s.store.token.value);
  }
  job.setup.plane = job.plane.get();
  job.setup.host_transport = job.transport.get();
  return job;
}

void Job::meet_after_printing(const CheckResult& result, double timeout_s) {
  plane->gather_all("report", "", Deadline::after_seconds(timeout_s), result.live);
}

int Job::finish(const CheckResult& result) {
  // Only rank 0 holds the whole table; the others have its review.
  // A compute verdict is given after the last collective: such a rank went
  // through every one with its peers, as an OK rank does.
  const bool at_end = result.me.ok || result.me.failed_phase == "compute";
  auto all_at_end = [&result] {
    for (const auto& s : rank_statuses(result))
      if (!s.ok() && !(s.kind == RankStatus::Kind::broken && s.failed_phase == "compute")) return false;
    return true;
  };
  const bool all_ok = at_end && (result.judged_all_ok ? *result.judged_all_ok : all_at_end());
  if (mpi && result.abandon_transport) {
    spdlog::info("not finalizing MPI: a failed transfer may still be in flight");
    mpi->abandon();
  } else if (mpi && !all_ok && !mpi->barrier_within(Deadline::after_seconds(3))) {
    spdlog::info("not finalizing MPI: some ranks did not reach the end");
    mpi->abandon();
  }
  if (result.me.ok) return static_cast<int>(ExitCode::ok);
  return static_cast<int>(result.me.timed_out ? ExitCode::timeout : ExitCode::broken);
}

}  // namespace gpudiag::cli
