// See sim_common.h.
#include "sim/sim_common.h"
#include "sim/sim_tree.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "checks/nccl_root_ids.h"
#include "checks/verdict.h"
#include "comm/nccl_roots.h"
#include "util/error.h"
#include "world/fingerprint_compare.h"

namespace gpudiag::sim {

void parallel_for(int n, int threads, const std::function<void(int)>& fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  // An error in one item is the run's, said by its process, not an abort.
  std::mutex mu;
  std::exception_ptr first;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next++) < n;) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard lock(mu);
          if (!first) first = std::current_exception();
        }
      }
    });
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

std::string after_exchange(const std::string& record) {
  RankRecord r = decode(record);
  r.nccl_id.clear();
  r.fingerprint = {};
  return encode(r);
}

std::string sim_root_id(int rank) {
  std::string hex;
  char b[9];
  for (unsigned i = 0; hex.size() < 256; ++i) {
    std::snprintf(b, sizeof b, "%08x", static_cast<unsigned>(rank) * 2654435761u + i);
    hex += b;
  }
  return hex;
}

bool sim_got_root_ids(const Gathered& g, const RankRecord& me) {
  static std::atomic<int> said{0};
  try {
    std::optional<RankRecord> rank0;  // rank 0's own is among its records too
    if (const auto& rec = g.records.at(0)) rank0 = decode(*rec);
    const auto ids = nccl_init_ids(me, rank0, decode_review(g.review).nccl_ids);
    for (int i = 0; i < static_cast<int>(ids.size()); ++i)
      if (ids[i] != sim_root_id(nccl_root_first_rank(i, me.world_size, me.nccl_roots)))
        throw Error(ExitCode::broken, "root " + std::to_string(i) + "'s id is another's");
    return static_cast<int>(ids.size()) == me.nccl_roots;
  } catch (const std::exception& e) {
    if (said++ < 3) std::fprintf(stderr, "sim: rank %d: %s\n", me.rank, e.what());
    return false;
  }
}

RankRecord sim_record(int rank, int size, int record_bytes, int nccl_roots, int per_node,
                      int drift_node) {
  RankRecord r;
  r.rank = rank;
  r.world_size = size;
  r.local_rank = rank % per_node;
  r.host = "simnode" + std::to_string(rank / per_node);
  r.pid = 100000 + rank;
  r.host_cpus = 64;
  r.backend = "host/tcp";
  r.endpoint = r.host + ":" + std::to_string(20000 + rank % 8);
  r.cuda_runtime = r.cuda_driver = "12.4";
  r.nccl_version = "2.21.5";
  r.launcher = "gpudiag-launch";
  if (nccl_roots > 0) {  // the check's NCCL plan, and a root's id where NCCL's rule puts one
    r.backend = "nccl";
    r.nccl_roots = nccl_roots;
    if (nccl_root_made_by(rank, size, nccl_roots) >= 0) r.nccl_id = sim_root_id(rank);
  }
  // Pad to a real record's size (GPU name, UUID, timings...).
  const int now = static_cast<int>(encode(r).size());
  if (record_bytes > now) r.gpu_name = std::string(record_bytes - now, 'x');
  // The fingerprint on top, as the check sends it: at the exchange only.
  r.fingerprint.fields = {
      {"kernel", "6.8.0-45-generic"},
      {"gpu.driver", rank / per_node == drift_node ? "535.183.01" : "550.54.15"},
      {"nccl.version", "2.21.5"},
      {"env.NCCL_SOCKET_IFNAME", "eth0"},
      {"nic.eth0.mtu", "9000"}};
  return r;
}

std::string sim_drift_line(int node, const std::vector<int>& ranks) {
  return "drift: simnode" + std::to_string(node) + " (" + (ranks.size() == 1 ? "rank " : "ranks ") +
         compress_ranks(ranks) + ")";
}

bool sim_names_drift(const Gathered& g, const std::string& line, int rank) {
  static std::atomic<int> said{0};
  std::string text;
  try {
    text = render_fingerprint(decode_review(g.review).fingerprint);
    if (text.rfind(line, 0) == 0 || text.find("\n" + line) != std::string::npos) return true;
  } catch (const std::exception& e) {
    text = e.what();
  }
  if (said++ < 3)
    std::fprintf(stderr, "sim: rank %d's report does not say \"%s\": %s\n", rank, line.c_str(),
                 text.empty() ? "(no fingerprint block)" : text.c_str());
  return false;
}

long long peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

void raise_descriptor_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

void write_line(int fd, const std::string& line) {
  const std::string s = line + "\n";
  if (write(fd, s.data(), s.size()) < 0) _exit(1);
}

void wait_released(int control) {
  char c;
  while (read(control, &c, 1) > 0) {
  }
}

namespace {
/// The parent's ends of every child's pipes: a child forked later closes
/// them, or a release() would never reach the earlier child.
std::vector<int>& parent_ends() {
  static std::vector<int> fds;
  return fds;
}
void forget(int fd) {
  auto& v = parent_ends();
  v.erase(std::remove(v.begin(), v.end(), fd), v.end());
}
}  // namespace

Child::Child(const std::function<void(int, int)>& body) {
  int to_parent[2], control[2];
  if (pipe(to_parent) != 0 || pipe(control) != 0)
    throw Error(ExitCode::broken, "gpudiag-sim: pipe failed");
  std::fflush(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw Error(ExitCode::broken, "gpudiag-sim: fork failed");
  if (pid_ == 0) {
    close(to_parent[0]);
    close(control[1]);
    for (int fd : parent_ends()) close(fd);
    parent_ends().clear();
    int rc = 0;
    try {
      body(to_parent[1], control[0]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpudiag-sim: %s\n", e.what());
      rc = 1;
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  close(to_parent[1]);
  close(control[0]);
  from_ = to_parent[0];
  control_ = control[1];
  parent_ends().push_back(from_);
  parent_ends().push_back(control_);
}

Child::~Child() {
  release();
  wait();
  if (from_ >= 0) {
    forget(from_);
    close(from_);
  }
}

std::string Child::read_line() {
  std::string s;
  char c;
  while (read(from_, &c, 1) == 1 && c != '\n') s += c;
  return s;
}

void Child::release() {
  if (control_ >= 0) {
    forget(control_);
    close(control_);
  }
  control_ = -1;
}

void Child::kill() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

bool Child::wait() {
  if (pid_ <= 0) return false;
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::unique_ptr<TcpStoreServer> judge_store(const std::string& secret, int clients) {
  TcpStoreServerOptions so;
  so.bind_host = "127.0.0.1";
  so.token = kTreeToken;
  so.secret = secret;
  so.world_size = clients;
  return std::make_unique<TcpStoreServer>(so);
}

StepBarrier::StepBarrier(int parties) : parties_(parties) {
  shared_ = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared_ == MAP_FAILED) throw Error(ExitCode::broken, "gpudiag-sim: no shared memory for the step barrier");
  new (shared_) std::atomic<int>(0);
}

StepBarrier::~StepBarrier() {
  if (shared_ && shared_ != MAP_FAILED) ::munmap(shared_, sizeof(std::atomic<int>));
}

void StepBarrier::arrive_and_wait(int step, double within_s) {
  auto& count = *static_cast<std::atomic<int>*>(shared_);
  count.fetch_add(1);
  const auto until = Deadline::after_seconds(within_s);
  while (count.load() < parties_ * (step + 1)) {
    if (until.expired())
      throw Error(ExitCode::broken, "gpudiag-sim: a process simulating nodes did not reach step " +
                                        std::to_string(step) + " (it failed: see above)");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace gpudiag::sim
