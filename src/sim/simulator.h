// The scale simulator: N simulated ranks in one process, each a real
// TcpStoreClient and a real StorePlane, run through the check's checkpoint
// sequence against a real TcpStoreServer (configured as `gpudiag launch`
// hosts it on one node: world size, token, a random job secret) in a child
// process, so its peak RSS is its own.
//
// A small pool of threads drives the ranks, not a thread per rank: at each
// checkpoint every live rank first publishes its record (publish_record), then
// rank 0 judges (waits for the records, reads them all, publishes the digest),
// then every other rank gathers, finding the digest already there. Faults:
// --missing K ranks join but never reach a checkpoint; --stop K reach the
// first two checkpoints, note the phase they are in and stop; --die K do the
// same, then the simulated launcher announces their deaths as it does for a
// killed rank. The last line sums it up:
//   sim: N ranks, K checkpoints, T s, store peak RSS M MiB, bytes through the
//   store B, missing named: X/Y
#pragma once

#include <cstdint>
#include <string>

namespace gpudiag::sim {

struct SimOptions {
  int ranks = 1024;
  int missing = 0, stop = 0, die = 0;
  int threads = 8;
  double timeout_s = 2.0;  ///< each checkpoint's wait, as `check --timeout`
  int record_bytes = 600;  ///< a rank's record, about a real one's size
  /// Every rank reads every record, as checkpoints did before the digest.
  bool all_to_all = false;
};

struct SimResult {
  int ranks = 0, checkpoints = 0;
  double seconds = 0;
  double store_peak_rss_mib = 0;
  std::uint64_t bytes = 0;      ///< keys and values through the store, all ranks
  int named = 0, expected = 0;  ///< absent ranks every live rank named, of those absent
  std::string summary() const;
};

SimResult run_simulation(const SimOptions& o);

}  // namespace gpudiag::sim
