// Host names in SLURM's hostlist syntax, the form `sbatch --exclude`,
// `srun -w` and `scontrol show hostnames` read: names that differ only in a
// trailing number of the same width collapse into one bracket of ranges
// ("node003,node004,node017" is "node[003-004,017]"); the rest stay as they
// are, comma-separated, in the order their groups first appear. Numbers keep
// their zero padding: zero-padded numbers of one width form a group, and
// unpadded numbers another ("n9,n10,n11" is "n[9-11]"), as SLURM writes them.
#pragma once

#include <string>
#include <vector>

namespace gpudiag {

/// The compressed list, "" for none. Duplicates are dropped.
std::string slurm_hostlist(const std::vector<std::string>& hosts);

/// The most names a list may expand to (a pool of 100k ranks has far fewer hosts).
inline constexpr std::size_t kMaxHosts = 1u << 18;

/// The names of a hostlist ("node[001-003,017],gpu[1-2]-ib"), in order,
/// duplicates dropped. Throws UsageError (exit 2) with what is wrong and how
/// to write it, on malformed text or more than kMaxHosts names.
std::vector<std::string> expand_slurm_hostlist(const std::string& text);

/// Whether `host` can be written into a hostlist as it is: no commas,
/// brackets, spaces or control characters (SLURM's separators and syntax).
bool hostlist_safe(const std::string& host);

}  // namespace gpudiag
