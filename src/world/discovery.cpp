#include "world/discovery.h"

#include <optional>

#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

/// One launcher's view, before deciding which one wins.
struct Candidate {
  Launcher launcher;
  int rank, size, local_rank, local_size;
  bool pmix = false;
  std::string source;
};

struct VarSet {
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

int read_int(const Env& env, const char* name) {
  auto v = env.get(name);
  auto n = parse_int(*v);
  if (!n || *n < 0 || *n > 1'000'000'000)
    throw UsageError(std::string(name) + "='" + *v + "' is not a non-negative integer",
                     std::string("unset ") + name + " or set it to a number");
  return static_cast<int>(*n);
}

/// A world size within what gpudiag's per-rank tables can hold: beyond it a
/// rank would spend gigabytes before it reports anything.
int read_world_size(const Env& env, const char* name) {
  const int n = read_int(env, name);
  if (n > kMaxWorldSize)
    throw UsageError(std::string(name) + "=" + std::to_string(n) + " is more ranks than gpudiag "
                         "supports (" + std::to_string(kMaxWorldSize) + ")",
                     std::string("check ") + name + "; a job this large needs node leaders "
                         "(docs/ARCHITECTURE.md)");
  return n;
}

/// Reads one variable set. nullopt when none of its variables are set; a
/// UsageError when only some of the `required` ones are.
std::optional<Candidate> read_set(const Env& env, Launcher l, const VarSet& vs, bool local_required,
                                  const std::string& source) {
  std::vector<const char*> required = {vs.rank, vs.size};
  if (local_required) required.push_back(vs.local_rank);
  std::vector<std::string> present, missing;
  for (auto* n : required) (env.has(n) ? present : missing).push_back(n);
  if (present.empty()) return std::nullopt;
  if (!missing.empty())
    throw UsageError(source + ": " + join(present, ", ") + " set but " + join(missing, ", ") +
                         " not",
                     "set all of them, or unset the stale ones");
  Candidate c{l, read_int(env, vs.rank), read_world_size(env, vs.size), 0, -1, false, source};
  if (env.has(vs.local_rank)) c.local_rank = read_int(env, vs.local_rank);
  if (env.has(vs.local_size)) c.local_size = read_int(env, vs.local_size);
  return c;
}

/// SLURM's local size: SLURM_NTASKS_PER_NODE when uniform, else this node's entry
/// of SLURM_STEP_TASKS_PER_NODE (indexed by SLURM_NODEID).
int slurm_local_size(const Env& env) {
  if (auto v = env.get("SLURM_STEP_TASKS_PER_NODE")) {
    auto list = expand_slurm_tasks_per_node(*v);
    auto node = env.has("SLURM_NODEID") ? read_int(env, "SLURM_NODEID") : 0;
    if (node < static_cast<int>(list.size())) return list[node];
  }
  if (auto v = env.get("SLURM_NTASKS_PER_NODE")) {
    auto list = expand_slurm_tasks_per_node(*v);
    if (list.size() == 1) return list[0];
  }
  return -1;
}

std::optional<Candidate> read_slurm(const Env& env) {
  if (!env.has("SLURM_STEP_ID") || !env.has("SLURM_PROCID")) return std::nullopt;
  const char* size_var = env.has("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  auto c = read_set(env, Launcher::slurm, {"SLURM_PROCID", size_var, "SLURM_LOCALID", ""}, true,
                    "SLURM_PROCID/" + std::string(size_var) + "/SLURM_LOCALID");
  if (!c) return c;
  c->local_size = slurm_local_size(env);
  if (env.has("PMIX_RANK")) {
    c->pmix = true;
    if (read_int(env, "PMIX_RANK") != c->rank)
      throw UsageError("PMIX_RANK=" + *env.get("PMIX_RANK") + " disagrees with SLURM_PROCID=" +
                       std::to_string(c->rank));
  }
  return c;
}

std::vector<Candidate> all_candidates(const Env& env) {
  std::vector<Candidate> out;
  auto add = [&](std::optional<Candidate> c) {
    if (c) out.push_back(std::move(*c));
  };
  const VarSet torch = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
  if (env.has("TORCHELASTIC_RUN_ID"))
    add(read_set(env, Launcher::torchrun, torch, true, "RANK/WORLD_SIZE/LOCAL_RANK + TORCHELASTIC_RUN_ID"));
  else if (env.has("GPUDIAG_LAUNCH_ID"))
    add(read_set(env, Launcher::gpudiag_launch, torch, true,
                 "RANK/WORLD_SIZE/LOCAL_RANK + GPUDIAG_LAUNCH_ID"));
  add(read_set(env, Launcher::open_mpi,
               {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE"},
               false, "OMPI_COMM_WORLD_*"));
  add(read_set(env, Launcher::mvapich,
               {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
                "MV2_COMM_WORLD_LOCAL_SIZE"},
               false, "MV2_COMM_WORLD_*"));
  add(read_set(env, Launcher::hydra, {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
               false, "PMI_RANK/PMI_SIZE"));
  add(read_slurm(env));
  if (!env.has("TORCHELASTIC_RUN_ID") && !env.has("GPUDIAG_LAUNCH_ID"))
    add(read_set(env, Launcher::by_hand, torch, false, "RANK/WORLD_SIZE"));
  return out;
}

void validate(const Candidate& c) {
  auto where = " (from " + c.source + ")";
  if (c.size < 1) throw UsageError("world size " + std::to_string(c.size) + " < 1" + where);
  if (c.rank >= c.size)
    throw UsageError("rank " + std::to_string(c.rank) + " >= world size " +
                         std::to_string(c.size) + where,
                     "ranks are 0-based: each must be below the world size");
  if (c.local_size == 0) throw UsageError("local size 0" + where);
  if (c.local_size > 0 && c.local_rank >= c.local_size)
    throw UsageError("local rank " + std::to_string(c.local_rank) + " >= local size " +
                     std::to_string(c.local_size) + where);
  if (c.local_size > c.size)
    throw UsageError("local size " + std::to_string(c.local_size) + " > world size " +
                     std::to_string(c.size) + where);
}

/// An outer launcher legitimately sees other numbers than the inner one.
bool is_outer_of(Launcher outer, Launcher inner) {
  auto level = [](Launcher l) {
    switch (l) {
      case Launcher::torchrun:
      case Launcher::gpudiag_launch: return 3;
      case Launcher::open_mpi:
      case Launcher::mvapich:
      case Launcher::hydra: return 2;
      case Launcher::slurm: return 1;
      default: return 0;
    }
  };
  return level(outer) > 0 && level(outer) < level(inner);
}

std::string describe(const Candidate& c) {
  return launcher_name(c.launcher) + " says rank " + std::to_string(c.rank) + "/" +
         std::to_string(c.size);
}

}  // namespace

bool World::mpi_launched() const {
  return launcher == Launcher::open_mpi || launcher == Launcher::mvapich ||
         launcher == Launcher::hydra || (launcher == Launcher::slurm && pmix);
}

std::string launcher_id(Launcher l) {
  switch (l) {
    case Launcher::torchrun: return "torchrun";
    case Launcher::gpudiag_launch: return "launch";
    case Launcher::open_mpi: return "openmpi";
    case Launcher::mvapich: return "mvapich";
    case Launcher::hydra: return "hydra";
    case Launcher::slurm: return "slurm";
    case Launcher::by_hand: return "env";
    case Launcher::none: return "none";
  }
  return "none";
}

std::string launcher_name(Launcher l) {
  switch (l) {
    case Launcher::torchrun: return "torchrun";
    case Launcher::gpudiag_launch: return "gpudiag launch";
    case Launcher::open_mpi: return "Open MPI (mpirun)";
    case Launcher::mvapich: return "MVAPICH (mpirun_rsh/mpiexec)";
    case Launcher::hydra: return "MPICH/Intel MPI (Hydra mpiexec)";
    case Launcher::slurm: return "SLURM (srun)";
    case Launcher::by_hand: return "environment variables set by hand";
    case Launcher::none: return "no launcher (single process)";
  }
  return "?";
}

World discover_world(const Env& env) {
  auto candidates = all_candidates(env);
  World w;
  if (candidates.empty() && !env.has("GPUDIAG_RANK_SOURCE")) {
    w.source = "no launcher variables found";
    return w;
  }
  std::size_t pick = 0;
  if (auto forced = env.get("GPUDIAG_RANK_SOURCE")) {
    pick = candidates.size();
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (launcher_id(candidates[i].launcher) == *forced) pick = i;
    if (pick == candidates.size())
      throw UsageError("GPUDIAG_RANK_SOURCE=" + *forced + " names no complete set of variables",
                       "use one of torchrun, launch, openmpi, mvapich, hydra, slurm, env");
  }
  const Candidate& c = candidates[pick];
  validate(c);
  w.launcher = c.launcher;
  w.rank = c.rank;
  w.size = c.size;
  w.local_rank = c.local_rank;
  w.local_size = c.local_size;
  w.pmix = c.pmix;
  w.source = c.source;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto& o = candidates[i];
    if (i == pick || is_outer_of(o.launcher, c.launcher)) continue;
    if (o.rank == c.rank && o.size == c.size) continue;
    w.warnings.push_back("using " + describe(c) + ", but " + describe(o) + " (" + o.source +
                         "): stale variables exported in the shell? Unset them, or set "
                         "GPUDIAG_RANK_SOURCE=" + launcher_id(o.launcher) + " to use those");
  }
  return w;
}

std::vector<int> expand_slurm_tasks_per_node(const std::string& s) {
  std::vector<int> out;
  for (const auto& part : split(s, ',')) {
    auto paren = part.find("(x");
    auto count = parse_int(part.substr(0, paren));
    long long times = 1;
    if (paren != std::string::npos) {
      if (part.back() != ')') return {};
      auto t = parse_int(std::string_view(part).substr(paren + 2, part.size() - paren - 3));
      if (!t || *t < 1 || *t > 100000) return {};
      times = *t;
    }
    if (!count || *count < 0) return {};
    out.insert(out.end(), times, static_cast<int>(*count));
  }
  return out;
}

}  // namespace gpudiag
