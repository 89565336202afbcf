// Joining a job from the command line: discover the world from the
// environment, start MPI if an MPI launcher started us, and pick the control
// plane and host transport the check uses.
#pragma once

#include <memory>

#include "checks/check.h"
#include "tree/tree_host.h"
#include "comm/mpi.h"
#include "store/store_join.h"
#include "settings/job_settings.h"

namespace gpudiag::cli {

struct Job {
  CheckSetup setup;
  std::unique_ptr<MpiSession> mpi;
  JoinedStore store;  ///< when ranks meet through a store (declared before plane: outlives it)
  /// A node leader's stores and judges (tree_host.h): outlives the plane, so
  /// this rank's goodbye reaches its node's store before they stop.
  std::unique_ptr<TreeHost> tree;
  std::unique_ptr<Plane> plane;
  std::unique_ptr<HostTransport> transport;

  /// After this rank printed its results: meets the ranks still alive, so
  /// rank 0's summary comes below every rank's lines.
  void meet_after_printing(const CheckResult& result, double timeout_s);

  /// Ends the job: finalize MPI when every rank is known to be fine or can
  /// meet within a few seconds, else leave without waiting for stuck peers.
  /// Returns this rank's exit status (0 OK, 1 broken, 3 a peer timed out).
  int finish(const CheckResult& result);
};

/// Joins with the settings read once (settings/job_settings.h). Throws
/// UsageError for a setting the job's way of meeting needs and cannot use.
/// `tree`: the job may meet through node leaders (tree_host.h); `mpi_tree`:
/// under an MPI launcher too (the sweep meets MPI's way flat: its judge reads
/// every round's reports there).
Job join_job(const JobSettings& settings, bool tree = true, bool mpi_tree = true);

}  // namespace gpudiag::cli
