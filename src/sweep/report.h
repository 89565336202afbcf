// What gpudiag sweep writes, from the judge's outcome (run.h): the node
// verdict table for people, the JSON document (gpudiag-sweep/1, docs/json.md),
// node_exporter's textfile metrics, and the files a scheduler reads: the
// exclude list in SLURM's hostlist syntax and the good nodes as a hostfile
// (one host per line) or an mpirun hostfile ("host slots=N").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sweep/run.h"

namespace gpudiag::sweep {

/// The table and its summary lines, ending in a newline.
std::string sweep_text(const SweepOutcome& o);
nlohmann::json sweep_json(const SweepOutcome& o);
/// The metrics file's text (prometheus.h).
std::string sweep_prometheus(const SweepOutcome& o);
/// The nodes to exclude, as `sbatch --exclude` reads them ("" none), with a newline.
std::string exclude_file_text(const SweepOutcome& o);
/// The good nodes: one host per line, or (`mpi`) "host slots=N" with N its ranks.
std::string good_hostfile_text(const SweepOutcome& o, bool mpi);

}  // namespace gpudiag::sweep
