// See simulator.h. Written by hand: no library simulates a job's control plane.
#include "sim/simulator.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <set>
#include <thread>

#include "checks/record.h"
#include "checks/verdict.h"
#include "rendezvous/job_token.h"
#include "rendezvous/store_plane.h"
#include "rendezvous/tcp_store_client.h"
#include "rendezvous/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag::sim {

namespace {

constexpr const char* kToken = "gpudiag-sim";
/// The check's checkpoints without --sweep and --links, and the report's.
constexpr const char* kCheckpoints[] = {"exchange", "communicator", "all-reduce", "barrier",
                                        "report"};
/// Stopped and dead ranks are last seen at this checkpoint (communicator).
constexpr int kLastForFaulty = 1;

/// Runs fn(0..n-1) on `threads` threads.
void parallel_for(int n, int threads, const std::function<void(int)>& fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next++) < n;) fn(i);
    });
  for (auto& t : pool) t.join();
}

/// The store, as `gpudiag launch` serves it, in a child process: it writes
/// its port, serves until the parent closes `control`, then writes its peak
/// RSS in KiB.
class StoreProcess {
 public:
  StoreProcess(int world_size, const std::string& secret) {
    int to_parent[2], control[2];
    if (pipe(to_parent) != 0 || pipe(control) != 0)
      throw Error(ExitCode::broken, "gpudiag-sim: pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw Error(ExitCode::broken, "gpudiag-sim: fork failed");
    if (pid_ == 0) {
      close(to_parent[0]);
      close(control[1]);
      serve(world_size, secret, to_parent[1], control[0]);
    }
    close(to_parent[1]);
    close(control[0]);
    from_child_ = to_parent[0];
    control_ = control[1];
    port_ = static_cast<int>(read_number());
    if (port_ <= 0) throw Error(ExitCode::broken, "gpudiag-sim: the store did not start");
  }
  int port() const { return port_; }
  /// Stops the store; returns its peak RSS in MiB.
  double stop() {
    close(control_);
    const double kib = static_cast<double>(read_number());
    waitpid(pid_, nullptr, 0);
    close(from_child_);
    return kib / 1024.0;
  }

 private:
  [[noreturn]] static void serve(int world_size, const std::string& secret, int out, int control) {
    long long answer = -1;
    try {
      TcpStoreServerOptions o;
      o.bind_host = "127.0.0.1";
      o.token = kToken;
      o.world_size = world_size;
      o.secret = secret;
      TcpStoreServer server(o);
      answer = server.port();
      write_number(out, answer);
      char c;
      while (read(control, &c, 1) > 0) {
      }
      rusage ru{};
      getrusage(RUSAGE_SELF, &ru);
      write_number(out, ru.ru_maxrss);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpudiag-sim: the store: %s\n", e.what());
      if (answer < 0) write_number(out, -1);
    }
    _exit(0);
  }
  static void write_number(int fd, long long v) {
    const std::string s = std::to_string(v) + "\n";
    if (write(fd, s.data(), s.size()) < 0) _exit(1);
  }
  long long read_number() {
    std::string s;
    char c;
    while (read(from_child_, &c, 1) == 1 && c != '\n') s += c;
    return s.empty() ? -1 : std::stoll(s);
  }
  pid_t pid_ = -1;
  int from_child_ = -1, control_ = -1, port_ = 0;
};

void raise_descriptor_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

RankRecord sim_record(int rank, int size, int record_bytes) {
  RankRecord r;
  r.rank = rank;
  r.world_size = size;
  r.local_rank = rank % 8;
  r.host = "simnode" + std::to_string(rank / 8);
  r.pid = 100000 + rank;
  r.host_cpus = 64;
  r.backend = "host/tcp";
  r.endpoint = r.host + ":" + std::to_string(20000 + rank % 8);
  r.cuda_runtime = r.cuda_driver = "12.4";
  r.nccl_version = "2.21.5";
  r.launcher = "gpudiag-launch";
  // Pad to a real record's size (GPU name, UUID, timings...).
  const int now = static_cast<int>(encode(r).size());
  if (record_bytes > now) r.gpu_name = std::string(record_bytes - now, 'x');
  return r;
}

}  // namespace

std::string SimResult::summary() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "sim: %d ranks, %d checkpoints, %.1f s, store peak RSS %.0f MiB, bytes through "
                "the store %llu, missing named: %d/%d",
                ranks, checkpoints, seconds, store_peak_rss_mib,
                static_cast<unsigned long long>(bytes), named, expected);
  return line;
}

SimResult run_simulation(const SimOptions& o) {
  const int n = o.ranks;
  if (o.missing + o.stop + o.die >= n)
    throw UsageError("gpudiag-sim: --missing + --stop + --die must leave rank 0 and others",
                     "lower them");
  raise_descriptor_limit();
  // As gpudiag launch on one node: a random job secret, proven at each handshake.
  const std::string secret = random_secret();
  StoreProcess store(n, secret);
  const auto t0 = std::chrono::steady_clock::now();

  // The faulty ranks, spread over the job (never rank 0, the judge).
  enum class Fate { fine, missing, stop, die };
  std::vector<Fate> fate(n, Fate::fine);
  const int faulty = o.missing + o.stop + o.die;
  for (int i = 0; i < faulty; ++i) {
    const int r = 1 + static_cast<int>(static_cast<long long>(i) * (n - 1) / faulty);
    fate[r] = i < o.missing ? Fate::missing : i < o.missing + o.stop ? Fate::stop : Fate::die;
  }

  // Every rank joins the store, as world_setup does.
  std::vector<std::unique_ptr<Plane>> planes(n);
  parallel_for(n, o.threads, [&](int r) {
    auto client = std::make_unique<TcpStoreClient>("127.0.0.1", store.port(), kToken,
                                                   Deadline::after_seconds(60), secret,
                                                   static_cast<std::uint32_t>(r));
    planes[r] = make_store_plane(std::move(client),
                                 {r, n, r % 8, "simnode" + std::to_string(r / 8), 100000 + r},
                                 Deadline::after_seconds(60));
  });
  const double join_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "sim: %d ranks joined the store in %.1f s\n", n, join_s);
  TcpStoreClient launcher("127.0.0.1", store.port(), kToken, Deadline::after_seconds(10), secret);
  std::vector<std::string> records(n);
  for (int r = 0; r < n; ++r) records[r] = encode(sim_record(r, n, o.record_bytes));

  SimResult res;
  res.ranks = n;
  std::vector<int> live, everyone;
  for (int r = 0; r < n; ++r) live.push_back(r);
  if (o.all_to_all) everyone = live;
  std::vector<std::optional<RankRecord>> table(n);
  // Only the missing ranks each rank heard of are kept: a Gathered holds a
  // slot per rank, fine in a rank's own process, n^2 for n ranks in this one.
  std::vector<std::vector<int>> last(n);
  int cp = 0;
  for (const char* name : kCheckpoints) {
    auto arrives = [&](int r) {
      return fate[r] == Fate::fine || (fate[r] != Fate::missing && cp <= kLastForFaulty);
    };
    if (cp == kLastForFaulty + 1) {
      parallel_for(n, o.threads, [&](int r) {
        if (fate[r] == Fate::stop || fate[r] == Fate::die) planes[r]->note_phase("all-reduce");
      });
      for (int r = 0; r < n; ++r)
        if (fate[r] == Fate::die)
          publish_failure(launcher,
                          "rank " + std::to_string(r) + " [simnode" + std::to_string(r / 8) + "-" +
                              std::to_string(r % 8) + "] (pid " + std::to_string(100000 + r) +
                              ") was killed by SIGKILL (seen by gpudiag-sim)",
                          Deadline::after_seconds(10), FailureKind::died, r);
    }
    const bool exchange = cp == 0;
    Review review = [&](const Gathered& g) {
      std::vector<std::optional<RankRecord>> now(n);
      for (int r = 0; r < n; ++r)
        if (g.records[r]) now[r] = decode(*g.records[r]);
      return encode_review(review_table(now, table, g.missing, exchange));
    };
    // Every rank publishes, rank 0 judges, then the others read the digest.
    parallel_for(n, o.threads, [&](int r) {
      if (r != 0 && arrives(r))
        publish_record(*planes[r], records[r], Deadline::after_seconds(o.timeout_s));
    });
    const auto tj = std::chrono::steady_clock::now();
    last[0] =
        planes[0]
            ->gather_all(name, records[0], Deadline::after_seconds(o.timeout_s), live, {}, review)
            .missing;
    const double judged_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - tj).count();
    parallel_for(n, o.threads, [&](int r) {
      if (r != 0 && arrives(r))
        last[r] = planes[r]
                      ->gather_all(name, records[r], Deadline::after_seconds(o.timeout_s), live,
                                   everyone, review)
                      .missing;
    });
    std::fprintf(stderr, "sim: checkpoint %s done at %.1f s (rank 0 judged in %.1f s)\n", name,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 judged_s);
    live.clear();
    std::set<int> gone(last[0].begin(), last[0].end());
    for (int r = 0; r < n; ++r)
      if (!gone.count(r)) live.push_back(r);
    ++cp;
  }
  res.checkpoints = cp;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Named: an absent rank every rank still there names as missing at the end.
  for (int a = 0; a < n; ++a) {
    if (fate[a] == Fate::fine) continue;
    ++res.expected;
    bool everywhere = true;
    for (int r = 0; r < n && everywhere; ++r) {
      if (fate[r] != Fate::fine) continue;
      const auto& m = last[r];
      everywhere = std::binary_search(m.begin(), m.end(), a);
    }
    if (everywhere) ++res.named;
  }
  for (const auto& p : planes) res.bytes += p->bytes_moved();
  planes.clear();
  res.store_peak_rss_mib = store.stop();
  return res;
}

}  // namespace gpudiag::sim
