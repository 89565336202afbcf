// Who am I: rank, world size, local rank and local size from the launcher's
// environment variables.
//
// Launchers nest (srun runs torchrun, sbatch runs mpirun) and children inherit
// every variable, so several complete sets can be present at once. The
// innermost launcher wins; it is found by checking, in this order:
//
//   1. torchrun            RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE + TORCHELASTIC_RUN_ID
//   2. gpudiag launch      the same four                                  + GPUDIAG_LAUNCH_ID
//   3. Open MPI            OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
//   4. MVAPICH             MV2_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
//   5. MPICH / Intel MPI   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   6. SLURM srun          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and the local
//                          size from SLURM_NTASKS_PER_NODE or SLURM_STEP_TASKS_PER_NODE;
//                          only inside a job step (SLURM_STEP_ID set): an sbatch
//                          script itself has SLURM_PROCID=0 too. With PMIX_RANK it is
//                          "srun --mpi=pmix" and MPI can initialise.
//   7. by hand             RANK/WORLD_SIZE/LOCAL_RANK[/LOCAL_WORLD_SIZE] without a marker
//   8. none                a single process: rank 0 of 1
//
// A by-hand set loses to a real launcher: RANK exported in a shell and then
// run under mpirun is stale, not inner. Any other complete set that disagrees
// with the winner, and is not simply an outer launcher's (srun around
// torchrun), becomes a warning naming both. GPUDIAG_RANK_SOURCE=<name> forces a
// source (torchrun, launch, openmpi, mvapich, hydra, slurm, env). Half a set,
// non-numeric values or rank >= size are a UsageError.
#pragma once

#include <string>
#include <vector>

#include "util/env.h"

namespace gpudiag {

/// The most ranks a job may have (WORLD_SIZE and its launcher equivalents).
inline constexpr int kMaxWorldSize = 1 << 20;

enum class Launcher { torchrun, gpudiag_launch, open_mpi, mvapich, hydra, slurm, by_hand, none };

struct World {
  Launcher launcher = Launcher::none;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = -1;   ///< -1: the launcher did not say; learnt at the exchange
  bool pmix = false;     ///< srun --mpi=pmix: MPI can initialise under SLURM
  std::string source;    ///< the variables used, e.g. "OMPI_COMM_WORLD_*"
  std::vector<std::string> warnings;

  /// True when an MPI library launched this process (MPI_Init will find its peers).
  bool mpi_launched() const;
};

/// Short stable name ("torchrun", "openmpi", ...), used by GPUDIAG_RANK_SOURCE and JSON.
std::string launcher_id(Launcher l);
/// Human name ("Open MPI (mpirun)", ...).
std::string launcher_name(Launcher l);

/// Finds the rank from `env` as described above. Throws UsageError on
/// inconsistent or partial variables.
World discover_world(const Env& env);

/// "2(x3),1" -> {2,2,2,1}; SLURM's compressed tasks-per-node list. Empty on bad input.
std::vector<int> expand_slurm_tasks_per_node(const std::string& s);

}  // namespace gpudiag
