// ras_note_lines(), ras_not_asked(), RasProbe (ras_note.h).
#include "launch/ras_note.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "nccl_ras/findings.h"
#include "nccl_ras/motion.h"
#include "store/peer_identity.h"
#include "util/deadline.h"
#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

/// The parent of `pid` from /proc/PID/stat (0 when unknown).
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  auto close = stat.rfind(')');  // the command may hold spaces and parentheses
  if (close == std::string::npos || close + 4 > stat.size()) return 0;
  auto fields = split(std::string_view(stat).substr(close + 2), ' ');
  if (fields.size() < 2) return 0;
  auto v = parse_int(fields[1]);
  return v ? static_cast<pid_t>(*v) : 0;
}

/// The rank whose process is `pid` or an ancestor of it, at most 16 generations up.
const LocalRank* rank_of(long long pid, const std::vector<LocalRank>& ranks) {
  pid_t p = static_cast<pid_t>(pid);
  for (int depth = 0; p > 1 && depth < 16; ++depth, p = parent_of(p))
    for (const auto& r : ranks)
      if (r.pid == p) return &r;
  return nullptr;
}

/// This host's addresses, numeric (127.0.0.1 and ::1 among them).
std::set<std::string> local_addresses() {
  std::set<std::string> out{"127.0.0.1", "::1"};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (auto* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6))
      continue;
    char buf[NI_MAXHOST];
    const socklen_t len =
        a->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::getnameinfo(a->ifa_addr, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0) {
      std::string ip = buf;
      out.insert(ip.substr(0, ip.find('%')));  // fe80::1%eth0
    }
  }
  ::freeifaddrs(list);
  return out;
}

/// Lines of RAS findings printed at most; the rest are counted.
constexpr std::size_t kMaxRasLines = 40;

/// QueryOptions::vet for the launcher: an answer is the job's when the socket
/// that answered is held by one of this node's ranks (or a child of one: NCCL
/// runs in the rank's process), or by another process of the job's user (it
/// could signal the launcher anyway). Another user's listener on the RAS port
/// is not believed; a RAS on another host cannot be checked, and is said to be
/// unchecked.
std::string vet_answer(int fd, std::string& who, const std::vector<LocalRank>& ranks,
                       const std::string& host) {
  const auto sock = net::local_peer_socket(fd);
  if (!sock) {
    who = "a process on another host (not checked to be a rank of this job)";
    return {};
  }
  for (const auto& r : ranks)
    if (net::held_by_process(r.pid, sock->inode) || net::held_by_descendant(r.pid, sock->inode)) {
      who = "rank " + std::to_string(r.rank) + " [" + host + "-" + std::to_string(r.local_rank) +
            "] pid " + std::to_string(r.pid);
      return {};
    }
  // The job's user may run its own RAS elsewhere in its process tree (or a
  // model of it); another user's listener on the port is not believed.
  if (sock->uid == static_cast<std::uint32_t>(::geteuid())) {
    who = "a process of this job's user (uid " + std::to_string(sock->uid) +
          ") that is not one of this node's ranks";
    return {};
  }
  return "the process that answered is no rank of this job (its socket is uid " +
         std::to_string(sock->uid) +
         "'s: another user's NCCL, or a listener on the RAS port): its answer is not used";
}

std::string where(const RasPlan& plan, const std::string& why) {
  std::string from =
      plan.settings.from.starts_with("NCCL_RAS_ADDR") ? plan.settings.from : "the default";
  return "NCCL RAS at " + clean_text(plan.settings.endpoint.text()) + " (" + from + "; " + why +
         ")";
}

}  // namespace

std::vector<std::string> ras_not_asked(const RasPlan& plan) {
  if (plan.timeout_s <= 0) return {};
  if (!plan.settings.enabled)
    return {"NCCL RAS: not asked: the ranks run with " + plan.settings.disabled_by +
            ", so their NCCL serves no RAS"};
  if (!plan.settings.problem.empty())
    return {"NCCL RAS: not asked: " + plan.settings.problem + " (NCCL then serves no RAS)"};
  return {};
}

std::vector<std::string> ras_note_lines(const ras::Outcome& o, const RasPlan& plan,
                                        const std::vector<LocalRank>& ranks,
                                        const std::string& host, const std::string& why) {
  const std::string head = where(plan, why);
  if (o.refused)
    return {head +
            ": nothing listens there (the ranks run no NCCL 2.24 or later with RAS on this "
            "node, or not yet): nothing is known from it"};
  if (o.untrusted) return {head + ": " + clean_text(o.error)};
  if (!o.answered)
    return {head + ": no answer: " + clean_text(o.error) + "; nothing is known from it"};
  const auto local = local_addresses();
  auto on_this_host = [&](const ras::ProcessRef& p) { return local.contains(p.host); };
  const ras::ProcessNamer name = [&](const ras::ProcessRef& p) -> std::string {
    if (!on_this_host(p)) return {};
    const auto* r = rank_of(p.pid, ranks);
    if (!r) return {};
    return "rank " + std::to_string(r->rank) + " [" + host + "-" + std::to_string(r->local_rank) +
           "] pid " + std::to_string(p.pid);
  };
  // Whose job: one of this node's ranks among the processes RAS names, or none of them.
  int here = 0, ours = 0;
  for (const auto& p : ras::named_processes(o.report)) {
    if (!on_this_host(p)) continue;
    ++here;
    if (rank_of(p.pid, ranks)) ++ours;
  }
  std::vector<std::string> out{head + ": " + ras::summary_line(o.report)};
  if (!o.answered_by.empty()) out.push_back("  answered by " + o.answered_by);
  if (here > 0 && ours == 0) {
    out.push_back("  it names " + std::to_string(here) +
                  " process(es) on this host and none is a "
                  "rank of this job (another job's NCCL on this host?): not used");
    return out;
  }
  auto findings = ras::finding_lines(o.report, name);
  auto moving = ras::motion_lines(o.report, name);
  for (const auto& f : findings) out.push_back("  " + f);
  for (const auto& f : moving) out.push_back("  " + f);
  if (findings.empty() && moving.empty())
    out.push_back(
        "  RAS saw nothing wrong: every process it knows answered, and each "
        "communicator's ranks agree on their operation counts and states");
  else if (findings.empty())
    out.push_back(o.report.samples == 2
                      ? "  RAS saw nothing wrong: the counts that differ were moving"
                      : "  RAS saw no fault it could confirm: counts differ in one sample");
  if (ours == 0)
    out.push_back(
        "  note: RAS names no process of this node, so it cannot be told from "
        "another job's NCCL on this host");
  for (const auto& c : ras::caveat_lines(o.report)) out.push_back("  note: " + c);
  if (out.size() > kMaxRasLines) {
    const std::size_t cut = out.size() - (kMaxRasLines - 1);
    out.resize(kMaxRasLines - 1);
    out.push_back("  ... and " + std::to_string(cut) + " more lines of RAS's report left out");
  }
  return out;
}

namespace {

/// Counts differ in `first`: ask again plan.sample_gap_s later, within the deadline, and
/// compare (nccl_ras/motion.h); or record why there is one sample only.
void second_sample(ras::Outcome& first, const RasPlan& plan, ras::QueryOptions q,
                   Deadline::Clock::time_point start) {
  const double gap = std::max(0.0, plan.sample_gap_s);
  const double left = q.deadline_s - seconds_since(start) - gap;
  // Room for the second answer: twice what the first took, and half a second at least.
  if (left < std::max(0.5, 2 * first.seconds)) {
    ras::one_sample(first.report, "no time for a second " + human_seconds(gap) + " later within " +
                                      human_seconds(q.deadline_s));
    return;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(gap));
  q.deadline_s = left;
  q.retry_s = left;
  auto later = ras::query(plan.settings.endpoint, q);
  if (!later.answered)
    ras::one_sample(first.report, "the second sample got no answer: " + clean_text(later.error));
  else
    ras::compare_samples(first.report, later.report, gap);
}

}  // namespace

struct RasProbe::State {
  RasPlan plan;
  std::vector<LocalRank> ranks;
  std::string host, why;
  ras::Outcome outcome;
  std::vector<std::string> lines;  ///< made on the probe's thread, off the launcher's loop
  std::atomic<bool> finished{false};
  std::thread thread;
};

RasProbe::RasProbe(const RasPlan& plan, std::vector<LocalRank> ranks, std::string host,
                   std::string why, double deadline_s)
    : state_(std::make_shared<State>()) {
  state_->plan = plan;
  state_->ranks = std::move(ranks);
  state_->host = std::move(host);
  state_->why = std::move(why);
  ras::QueryOptions q;
  q.deadline_s = std::max(0.5, deadline_s);
  q.retry_s = q.deadline_s;
  // RAS waits for the other processes about half of it: its answer must still get here.
  q.collect_timeout_s = std::max(1, static_cast<int>(q.deadline_s / 2));
  q.greeting_s = std::min(1.0, q.deadline_s / 3);
  // Read and parsed off the loop, and bounded: a reply past this is cut, not
  // parsed for ever (a real one is far smaller).
  q.max_reply = std::size_t{16} << 20;
  state_->thread = std::thread([s = state_, q]() mutable {
    const auto start = Deadline::Clock::now();
    q.vet = [&s](int fd, std::string& who) { return vet_answer(fd, who, s->ranks, s->host); };
    s->outcome = ras::query(s->plan.settings.endpoint, q);
    if (s->outcome.answered && ras::counts_differ(s->outcome.report))
      second_sample(s->outcome, s->plan, q, start);
    s->lines = ras_note_lines(s->outcome, s->plan, s->ranks, s->host, s->why);
    s->finished = true;
  });
}

RasProbe::~RasProbe() {
  if (state_->thread.joinable()) state_->thread.join();
}

bool RasProbe::done() const { return state_->finished; }

std::vector<std::string> RasProbe::lines() {
  if (state_->thread.joinable()) state_->thread.join();
  return state_->lines;
}

}  // namespace gpudiag::launch
