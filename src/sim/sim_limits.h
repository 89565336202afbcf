// What the machine allows the simulator (simulator.h), read before a run and
// said on one line with its figures: the descriptors a process may open
// (`ulimit -n`, raised to the hard limit), the ephemeral ports
// (net.ipv4.ip_local_port_range), the listen backlog (net.core.somaxconn),
// the cores and the load. A run whose busiest process would need more
// descriptors than the hard limit stops at once with one line saying how
// many and how to get them, rather than losing connections halfway through
// (a worker process holds a connection per node's leader, and more to the
// stores above a lost judge; a store process a listener and a connection per
// child for each judge it serves). Ports are checked for the one store that
// takes the most connections: Linux gives connections to different stores
// the same local port, so the range bounds one store's clients, not all of
// them. Header-only, as the simulator's parts that only it uses.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "util/error.h"

namespace gpudiag::sim {

struct MachineLimits {
  long long fd_soft = 0, fd_hard = 0;
  int port_low = 0, port_high = 0;  ///< 0: not readable
  int somaxconn = 0;
  long cores = 0;
  double load = 0;  ///< the 1-minute load average
  int ports() const { return port_high >= port_low && port_low > 0 ? port_high - port_low + 1 : 0; }
};

/// The limits as they are (after raising the soft descriptor limit to the hard one).
inline MachineLimits read_machine_limits() {
  MachineLimits m;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    auto ll = [](rlim_t v) { return v == RLIM_INFINITY ? (1LL << 30) : static_cast<long long>(v); };
    m.fd_soft = ll(rl.rlim_cur);
    m.fd_hard = ll(rl.rlim_max);
  }
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> m.port_low >> m.port_high;
  std::ifstream("/proc/sys/net/core/somaxconn") >> m.somaxconn;
  m.cores = sysconf(_SC_NPROCESSORS_ONLN);
  double avg[1] = {0};
  if (getloadavg(avg, 1) == 1) m.load = avg[0];
  return m;
}

/// "2 cores, load 0.4; `ulimit -n` 20000 (hard 20000), ports 32768-60999, somaxconn 4096"
inline std::string describe(const MachineLimits& m) {
  char b[256];
  std::snprintf(b, sizeof b,
                "%ld cores, load %.1f; `ulimit -n` %lld (hard %lld), ports %d-%d "
                "(net.ipv4.ip_local_port_range), somaxconn %d",
                m.cores, m.load, m.fd_soft, m.fd_hard, m.port_low, m.port_high, m.somaxconn);
  return b;
}

/// What a run needs: the descriptors of its busiest process, and the most
/// connections one store takes. Throws UsageError (one line, exit 2) when
/// the machine cannot give them; `more_workers` says which option spreads
/// the load over more processes ("" when none does).
inline void check_machine_limits(const MachineLimits& m, long long fds, long long one_store,
                                 const std::string& what, const std::string& more_workers) {
  constexpr long long kMargin = 64;  // the process's own files, pipes, logs
  const long long need = fds + kMargin;
  if (m.fd_soft > 0 && need > m.fd_soft)
    throw UsageError(what + " need " + std::to_string(need) + " descriptors in one process, and "
                         "this machine allows " + std::to_string(m.fd_soft) + " (`ulimit -n`, hard "
                         "limit " + std::to_string(m.fd_hard) + ")",
                     "raise it where gpudiag-sim runs (`ulimit -n " + std::to_string(need) +
                         "`; nofile in /etc/security/limits.conf)" +
                         (more_workers.empty() ? "" : ", or " + more_workers));
  if (m.ports() > 0 && one_store > m.ports())
    throw UsageError(what + " open " + std::to_string(one_store) + " connections to one store, "
                         "and this machine has " + std::to_string(m.ports()) + " ephemeral ports "
                         "(net.ipv4.ip_local_port_range " + std::to_string(m.port_low) + " " +
                         std::to_string(m.port_high) + ")",
                     "widen it: sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"");
}

}  // namespace gpudiag::sim
