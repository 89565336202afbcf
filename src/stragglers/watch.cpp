// See watch.h.
#include "stragglers/watch.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <spdlog/spdlog.h>

#include "stragglers/record.h"
#include "util/error.h"

namespace gpudiag::stragglers {

namespace {

JudgeSettings judge_settings(const WatchSettings& s, bool kernels) {
  JudgeSettings j;
  j.world_size = s.world;
  j.kernels = kernels;
  // A rank's kernel times come once a second (rank_hook_kernels.cpp), not as they
  // happen: a collective waits for its members' next reads.
  if (kernels) j.max_pending = std::clamp((1 << 20) / std::max(s.world, 1), 256, 2048);
  if (s.nnodes > 1) {
    // A rank's clock is its node's; the other nodes' records come in
    // batches, so a collective waits longer for its last records.
    for (int r = 0; r < s.world; ++r) j.domain_of.push_back(r / std::max(s.nproc, 1));
    if (!kernels) j.max_pending = std::clamp(262144 / std::max(s.world, 1), 64, 1024);
  }
  return j;
}

}  // namespace

void say_line(const std::string& text) {
  const std::string line = text + "\n";
  (void)!::write(2, line.data(), line.size());
}

Report unmeasured() {
  Report r;
  r.lines = summary_lines(r.summary, r.heard, nullptr);
  r.json = summary_json(r.summary, r.heard, nullptr);
  return r;
}

Watch::Watch(WatchSettings settings)
    : s_(std::move(settings)), judge_(judge_settings(s_, false)), kernels_(judge_settings(s_, true)) {
  fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd_) throw Error(ExitCode::internal, std::string("launch: --stragglers: socket(): ") + std::strerror(errno));
  int size = 4 << 20;  // room for a burst of every rank's records (the kernel caps it)
  (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socklen_t len = 0;
  const std::string path = s_.folder + "/stragglers.sock";
  if (path.size() < sizeof addr.sun_path) {
    std::memcpy(addr.sun_path, path.data(), path.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    address_ = path;
  } else {
    std::random_device rd;
    const std::string name = "gpudiag-stragglers-" + std::to_string(::getpid()) + "-" +
                             std::to_string((std::uint64_t{rd()} << 32) | rd());
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    address_ = "@" + name;
  }
  if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    throw Error(ExitCode::internal, "launch: --stragglers: cannot bind " + address_ + ": " +
                                        std::strerror(errno),
                "give --log-dir a folder this user may write, or leave out --stragglers");
  thread_ = std::thread([this] { run(); });
}

Watch::~Watch() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (!address_.empty() && address_[0] == '/') ::unlink(address_.c_str());
}

std::string Watch::label(int rank) const {
  const int local = rank - s_.rank_base;
  if (local >= 0 && local < s_.nproc) return "[" + s_.host + "-" + std::to_string(local) + "]";
  if (s_.nnodes < 2 || rank < 0 || rank >= s_.world) return "";
  const auto host = hosts_.find(rank / s_.nproc);
  if (host == hosts_.end()) return "";
  return "[" + host->second + "-" + std::to_string(rank % s_.nproc) + "]";
}

void Watch::say_events(const std::vector<Event>& events, std::vector<std::string>& lines) {
  for (const auto& ev : events) {
    const auto& e = ev.episode;
    if (e.gpu) {
      // A rank the host-side records name already in that group is said once.
      const auto key = std::make_pair(e.rank, e.group);
      if (!ev.recovered && judge_.names(e.rank, e.group)) quiet_.insert(key);
      if (quiet_.count(key)) {
        if (ev.recovered) quiet_.erase(key);
        continue;
      }
    }
    lines.push_back(event_line(ev, JudgeSettings{}.window, [this](int r) { return label(r); }));
  }
}

std::vector<Event> Watch::add(int rank, const Arrival& a) {
  return a.kernel_ns > 0 ? kernels_.add(rank, a) : judge_.add(rank, a);
}

void Watch::declare(const GroupDecl& g) {
  judge_.declare_group(g);
  kernels_.declare_group(g);
}

JudgeSummary Watch::summary() const {
  return merged(judge_.summary(), kernels_.summary());
}

void Watch::take(const char* data, std::size_t size) {
  std::vector<std::string> lines;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++heard_.datagrams;
    const auto d = parse_datagram({data, size}, s_.nproc, s_.world);
    if (!d) {
      ++heard_.invalid;
      return;
    }
    heard_.invalid += d->invalid;
    heard_.dropped = std::max(heard_.dropped, d->dropped);
    const bool sharing = s_.nnodes > 1;
    for (const auto& g : d->groups) {
      declare(g);
      if (sharing) outbox_.declare(g);
    }
    const int rank = s_.rank_base + d->local_rank;
    for (const auto& a : d->arrivals) {
      ++heard_.records;
      if (sharing) outbox_.add(d->local_rank, a);
      say_events(add(rank, a), lines);
    }
  }
  for (const auto& l : lines) say_line(l);
  if (!lines.empty()) write_prometheus();
}

void Watch::drain() {
  std::vector<char> buf(kMaxDatagram + 1);
  for (;;) {
    const auto n = ::recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) return;  // EAGAIN: all read
    if (static_cast<std::size_t>(n) > kMaxDatagram) {
      std::lock_guard<std::mutex> lock(mu_);
      ++heard_.invalid;
      continue;
    }
    take(buf.data(), static_cast<std::size_t>(n));
  }
}

void Watch::run() {
  try {
    while (!stop_) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) drain();
    }
    drain();
  } catch (const std::exception& e) {
    spdlog::warn("launch: --stragglers: the watch stopped: {}", e.what());
  }
}

void Watch::write_prometheus() {
  if (s_.prometheus.empty()) return;
  // The watch's thread and the exchange's (several nodes) both rewrite it.
  std::lock_guard<std::mutex> writing(prom_mu_);
  PromText prom;
  prom.gauge("gpudiag_info", "gpudiag's version and report", prom_info_labels("launch", ""), 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    add_samples(prom, summary(), s_.host, [this](int r) { return label(r); });
  }
  (void)write_prometheus_file(s_.prometheus, prom.text());
}

std::string Watch::shared(bool final) {
  std::lock_guard<std::mutex> lock(mu_);
  auto text = outbox_.publish(s_.node, s_.host, final);
  heard_.unshared = outbox_.lost();
  return text;
}

bool Watch::take_shared(int node, const std::string& text) {
  if (node < 0 || node >= s_.nnodes || node == s_.node) return false;
  std::vector<std::string> lines;
  bool final = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto share = parse_share(text, node, s_.nproc, s_.world);
    if (!share) {
      ++heard_.invalid;
      return false;
    }
    heard_.invalid += share->invalid;
    hosts_[node] = share->host;
    for (const auto& g : share->groups) declare(g);
    std::int64_t& taken = taken_[node];
    for (const auto& b : share->batches) {
      if (b.serial <= taken) continue;
      if (b.serial > taken + 1) heard_.missed += b.serial - taken - 1;
      taken = b.serial;
      for (const auto& r : b.records) {
        ++heard_.records;
        say_events(add(node * s_.nproc + r.local, r.arrival), lines);
      }
    }
    // Batches that left the value before this launcher read them.
    if (share->batches.empty() && share->serial > taken) {
      heard_.missed += share->serial - taken;
      taken = share->serial;
    }
    final = share->final && share->serial == taken;
  }
  for (const auto& l : lines) say_line(l);
  if (!lines.empty()) write_prometheus();
  return final;
}

void Watch::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

Report Watch::finish() {
  stop();
  write_prometheus();
  Report r;
  std::lock_guard<std::mutex> lock(mu_);
  r.summary = summary();
  r.heard = heard_;
  const RankLabel l = [this](int rank) { return label(rank); };
  r.lines = summary_lines(r.summary, r.heard, l);
  r.json = summary_json(r.summary, r.heard, l);
  return r;
}

}  // namespace gpudiag::stragglers
