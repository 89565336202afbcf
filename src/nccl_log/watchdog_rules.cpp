// Rules over PyTorch's watchdog lines and NCCL's DIAG report (side_line.h, side_ranks.h).
//
// torch-watchdog-timeout: the ranks whose watchdog timed a collective out are grouped by the
// process group it belonged to. In a group, the first collective to time out (the lowest
// SeqNum) is the one the group is stuck on: S. Every other rank's last sequence numbers in that
// group (its error-path status, else its latest status: a dump or periodic line) say where it
// is: last enqueued < S means it never issued collective S, so it is behind and the others wait
// for it (blamed); enqueued >= S and completed < S means it is in S too (waiting); completed >=
// S means it finished S, which the waiting ranks never could (unknown: they ran different
// collectives). Ranks of the default group that logged nothing at all, below the highest rank
// seen (ranks are numbered without gaps), are unknown too: the one behind may be among them.
// Only lines of one group are compared: sequence numbers count per group. Without a timeout
// there is no finding, however far apart the ranks' sequence numbers are (a busy job's ranks
// run ahead of each other by several collectives).
#include <algorithm>
#include <map>
#include <set>

#include "nccl_log/findings_internal.h"
#include "util/strings.h"

namespace gpudiag::nccl_log::detail {

namespace {

constexpr std::size_t kMaxGroups = 4;

std::string names(const std::vector<std::string>& labels, std::size_t cap = 4) {
  std::vector<std::string> parts(labels.begin(), labels.begin() + std::min(labels.size(), cap));
  if (labels.size() > cap) parts.push_back("and " + std::to_string(labels.size() - cap) + " more");
  return join(parts, ", ");
}

/// The rank's sequence numbers in group `pg`: the status at its own failure, else the latest.
const SideEvent* status_in(const TorchRank& r, const std::string& pg) {
  if (auto it = r.error_status.find(pg); it != r.error_status.end()) return &it->second;
  if (auto it = r.status.find(pg); it != r.status.end()) return &it->second;
  return nullptr;
}

std::string group_name(const std::string& pg, const TorchRank& r) {
  if (pg.empty() || pg == "0") return {};
  std::string desc;
  if (const SideEvent* e = status_in(r, pg); e && !e->line.pg_desc.empty())
    desc = " (" + e->line.pg_desc + ")";
  return " in process group " + pg + desc;
}

struct Verdict {
  std::vector<std::pair<const TorchRank*, const SideEvent*>> behind;
  std::vector<std::string> waiting, unknown;
  bool every_rank_has_numbers = true;
};

/// Where every rank stands against collective `seq` of group `pg` (see the header comment).
Verdict judge(const Job& job, const std::string& pg, long long seq,
              const std::set<const TorchRank*>& timed_out) {
  Verdict v;
  std::vector<std::string> also_in;  // in the collective, no timeout of their own (yet)
  std::set<int> seen;
  int highest = -1;
  for (const auto& r : job.torch) {
    if (r.global_rank >= 0) seen.insert(r.global_rank), highest = std::max(highest, r.global_rank);
    const SideEvent* st = status_in(r, pg);
    if (timed_out.count(&r)) {
      v.waiting.push_back(r.label);
      v.every_rank_has_numbers = v.every_rank_has_numbers && st;
      continue;
    }
    if (r.global_rank < 0 && !st) continue;  // an unnamed record (take-down lines of old torch)
    if (!st || seq < 0) {
      v.unknown.push_back(r.label);
      v.every_rank_has_numbers = false;
    } else if (st->line.enqueued < seq) {
      v.behind.emplace_back(&r, st);
    } else if (st->line.completed >= seq) {
      v.unknown.push_back(r.label + " (completed " + std::to_string(seq) + ")");
    } else {
      also_in.push_back(r.label + " (no timeout logged)");
    }
  }
  v.waiting.insert(v.waiting.end(), also_in.begin(), also_in.end());
  if (pg.empty() || pg == "0") {  // ranks of the default group are the global ranks 0..N-1
    for (const auto& p : job.processes) highest = std::max(highest, p.world_size() - 1);
    for (int r = 0; r <= highest && v.unknown.size() < 64; ++r)
      if (!seen.count(r)) {
        v.unknown.push_back("rank " + std::to_string(r) + " (no watchdog line)");
        v.every_rank_has_numbers = false;
      }
  }
  return v;
}

const char* kFlightRecorder =
    "the flight recorder shows each rank's last collectives (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1, then `gpudiag fr` on the dumps)";

std::string behind_remedy(const std::string& who) {
  return who +
         " never issued the collective the others wait in: look at where it is (py-spy "
         "dump --pid PID on its process; " +
         std::string(kFlightRecorder) +
         "). Usual causes: it took another code path (a collective under `if rank == ...`, a "
         "data loader that gave it fewer batches, an exception caught and skipped), or it is "
         "slower than the timeout (checkpointing, evaluation or data loading on one rank only: "
         "do it on every rank, or raise timeout= in init_process_group), or it died (its log "
         "ends early)";
}

void timeout_finding(const Job& job, const std::string& pg,
                     const std::vector<const TorchRank*>& ranks, std::vector<Finding>& out) {
  const TorchRank* first = *std::min_element(ranks.begin(), ranks.end(), [](auto* a, auto* b) {
    return a->timeout->line.seq < b->timeout->line.seq;
  });
  const SideLine& t = first->timeout->line;
  const long long seq = t.seq;
  Verdict v = judge(job, pg, pg.empty() ? -1 : seq, {ranks.begin(), ranks.end()});

  Finding f;
  f.id = "torch-watchdog-timeout";
  f.severity = Severity::problem;
  f.title = "PyTorch's watchdog timed out collective " +
            (seq >= 0 ? std::to_string(seq) + " " : std::string()) + "(" +
            (t.op.empty() ? "?" : t.op) + ")" + group_name(pg, *first);
  if (t.ran_ms >= 0) f.title += " after " + std::to_string(t.ran_ms) + " ms";
  std::vector<std::string> timed;
  for (const auto* r : ranks) timed.push_back(r->label);
  f.title += " on " + names(timed);
  f.evidence.push_back(first->timeout->where);
  for (const auto& [r, st] : v.behind) f.blamed.push_back(r->label);
  if (!v.behind.empty()) {
    const SideLine& b = v.behind.front().second->line;
    f.title += "; " + names(f.blamed) + (f.blamed.size() == 1 ? " is" : " are") +
               " behind: last enqueued collective " + std::to_string(b.enqueued) +
               ", last completed " + std::to_string(b.completed);
    f.evidence.push_back(v.behind.front().second->where);
    f.remedy = behind_remedy(names(f.blamed));
  } else if (!pg.empty() && v.every_rank_has_numbers) {
    f.title += "; every rank had issued it: none is behind";
    if (const SideEvent* st = status_in(*first, pg)) f.evidence.push_back(st->where);
    f.remedy =
        "every rank entered the collective and it never finished: look for an NCCL WARN or a "
        "network or GPU fault (the findings above; run with NCCL_DEBUG=INFO); ranks that passed "
        "different sizes or called collectives in a different order hang here too (" +
        std::string(kFlightRecorder) + "); raise the timeout only for a step known to be slow";
  } else {
    f.title += pg.empty() ? "; these lines do not say which rank is behind (PyTorch 2.3+ logs "
                            "each rank's last enqueued and completed collective)"
                          : "; the rank behind is not among those that logged sequence numbers";
    f.remedy = behind_remedy("the rank that logged no timeout, if one did not,") +
               "; pass every rank's log to name it";
  }
  const TorchRank* down = first->teardown ? first : nullptr;
  for (const auto* r : ranks)
    if (!down && (r->teardown || r->failed)) down = r;
  if (down && f.evidence.size() < 3)
    f.evidence.push_back((down->teardown ? *down->teardown : *down->failed).where);
  f.waiting = std::move(v.waiting);
  f.unknown = std::move(v.unknown);
  for (const auto* list : {&f.blamed, &f.waiting, &f.unknown})
    f.who.insert(f.who.end(), list->begin(), list->end());
  out.push_back(std::move(f));
}

std::string error_remedy(const std::string& what) {
  if (contains(what, "CUDA error"))
    return "a CUDA error on that rank (an illegal memory access, a device-side assert) is the "
           "cause, NCCL and the watchdog only report it: rerun with CUDA_LAUNCH_BLOCKING=1 to "
           "see the kernel that failed";
  if (contains(what, "remote process exited") || contains(what, "ncclRemoteError") ||
      contains(what, "network error"))
    return "a peer process died or the network connection broke: the rank that failed first "
           "is the cause (its log, and the NCCL findings above); the others only lost it";
  return "read the exception text and the first NCCL WARN (NCCL_DEBUG=INFO shows it); the "
         "watchdog takes every rank down after such an error";
}

void error_finding(const Job& job, bool any_timeout, std::vector<Finding>& out) {
  Finding f;
  std::string what;
  // Ranks named first; take-down lines that name no rank (torch before 2.2 in a shared file)
  // only when no named rank says more.
  for (bool named : {true, false}) {
    if (!f.blamed.empty()) break;
    for (const auto& r : job.torch) {
      if (r.timeout || (r.global_rank >= 0) != named) continue;
      bool error = r.error && !is_timeout_text(r.error->line.detail);
      bool down = (r.failed || r.teardown) && !any_timeout;
      if (!error && !down) continue;
      f.blamed.push_back(r.label);
      if (error && what.empty()) what = r.error->line.detail;
      if (f.evidence.size() < 3)
        f.evidence.push_back(error ? r.error->where : (r.failed ? *r.failed : *r.teardown).where);
    }
  }
  if (f.blamed.empty()) return;
  f.id = "torch-nccl-error";
  f.severity = Severity::problem;
  f.title = "PyTorch's watchdog caught an error on " + names(f.blamed) +
            " and took the process down" + (what.empty() ? "" : ": " + what.substr(0, 160));
  f.who = f.blamed;
  f.remedy = error_remedy(what);
  out.push_back(std::move(f));
}

void stuck_finding(const Job& job, std::vector<Finding>& out) {
  Finding f;
  for (const auto& r : job.torch)
    if (r.heartbeat) {
      f.who.push_back(r.label);
      if (f.evidence.size() < 3) f.evidence.push_back(r.heartbeat->where);
    }
  if (f.who.empty()) return;
  f.id = "torch-watchdog-stuck";
  f.severity = Severity::problem;
  f.title = "PyTorch's watchdog on " + names(f.who) +
            " stopped making progress and its heartbeat monitor ended the process";
  f.unknown = f.who;
  f.remedy =
      "the watchdog thread was blocked in a CUDA or NCCL call, or the whole process froze (a "
      "stalled file system, another thread holding the GIL inside a CUDA call): `py-spy dump "
      "--native --pid PID` shows where; a status line with `Last enqueued NCCL work: -1` means "
      "no collective was in flight; TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC raises the limit";
  out.push_back(std::move(f));
}

}  // namespace

void rule_torch_watchdog(const Job& job, std::vector<Finding>& out) {
  std::map<std::string, std::vector<const TorchRank*>> timed_out;  // by process group
  for (const auto& r : job.torch)
    if (r.timeout) timed_out[r.timeout_group()].push_back(&r);
  std::size_t groups = 0;
  for (const auto& [pg, ranks] : timed_out)
    if (groups++ < kMaxGroups) timeout_finding(job, pg, ranks, out);
  error_finding(job, !timed_out.empty(), out);
  stuck_finding(job, out);
}

void rule_nccl_diag(const Job& job, std::vector<Finding>& out) {
  Collector failing, incomplete;
  for (const auto& e : job.diag) {
    if (!e.line.diag_issue) continue;
    std::string_view text = e.line.detail;
    bool p2p = contains(text, "p2p:") && !contains(text, "check returned");
    bool bandwidth = contains(text, "net bw:") && contains(text, "Gbit/s");
    auto& c = p2p || bandwidth ? failing : incomplete;
    if (c.evidence.size() < 3) c.evidence.push_back(e.where);
    if (c.first.empty()) c.first = std::string(text.substr(0, 200));
  }
  auto emit = [&](const Collector& c, Severity s, std::string title, std::string remedy) {
    if (c.evidence.empty()) return;
    out.push_back({"nccl-diag",
                   s,
                   std::move(title) + ": " + c.first,
                   {},
                   c.evidence,
                   std::move(remedy),
                   {},
                   {},
                   {}});
  };
  emit(failing, Severity::problem, "NCCL's diagnostics found a path that fails its check",
       "NCCL's line names the GPU pair or NIC and what to check: for P2P `nvidia-smi topo -p2p` "
       "on that pair, IOMMU/ACS settings on bare metal, the IMEX domain for NVLink fabrics "
       "(NCCL_P2P_DISABLE=1 works around it at a speed cost); for a bandwidth outlier the link "
       "of that NIC (ib_write_bw between the two hosts, port counters, cables)");
  emit(incomplete, Severity::note, "NCCL's diagnostics could not complete a check",
       "not a fault of the job: the check needs what NCCL's line names (perftest's ib_write_bw "
       "on every node, an IB network plugin, a usable IB device)");
}

}  // namespace gpudiag::nccl_log::detail
