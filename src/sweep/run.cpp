// The sweep's rank loop (run.h). Records on the wire are small JSON objects,
// read defensively: a peer's record that does not parse, or holds values out
// of range, counts as no report (its pair then failed, or its partner rests),
// never as a crash. The judge's review carries the next round, the nodes that
// no longer take part and, at the end, how many nodes are excluded.
//
// Under node leaders (Plane::judged_by_tree) the tree's judges review, not
// rank 0: rank 0 asks for every record at the exchange only (as a check's
// report does once), gets each round's results folded by the groups
// (tree_results.h, Gathered::judge_share), and sends its plan as its record
// at a third checkpoint a round (sweep-plan-K), which every digest carries.
#include "sweep/run.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "checks/backend_choice.h"
#include "checks/memory_checks.h"
#include "checks/test_hook.h"
#include "checks/watchdog.h"
#include "checks/verdict.h"
#include "gpu/cuda.h"
#include "report/status_line.h"
#include "sweep/pair_meter.h"
#include "sweep/tree_results.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/text.h"
#include "world/fingerprint.h"
#include "world/fingerprint_compare.h"
#include "world/gpu_choice.h"

namespace gpudiag::sweep {

namespace {

using nlohmann::json;

constexpr std::uint64_t kGpuBytes = 64ull << 20, kHostBytes = 4ull << 20;
constexpr std::uint64_t kGpuMem = 256ull << 20, kHostMem = 16ull << 20;
constexpr std::size_t kMaxField = 512;  ///< a peer's endpoint, id or label

std::optional<json> parse(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  json j = json::parse(*s, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::string text_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > kMaxField)
    return {};
  return it->get<std::string>();
}

class SweepRun {
 public:
  SweepRun(const SweepOptions& o, CheckSetup& s, std::string advertise, std::string token)
      : o_(o), s_(s), plane_(*s.plane), advertise_(std::move(advertise)), token_(std::move(token)),
        watchdog_(s.host + "-" + std::to_string(s.world.local_rank)) {
    n_ = plane_.size();
    me_.rank = s.world.rank;
    me_.world_size = n_;
    me_.local_rank = s.world.local_rank;
    me_.host = s.host;
    me_.pid = static_cast<int>(getpid());
    me_.launcher = launcher_id(s.world.launcher);
    gone_.assign(n_, false);
    hook_ = TestHook::from_env(s.env, me_.rank);
  }

  SweepOutcome run() {
    plane_.set_patient(true);
    tree_ = plane_.judged_by_tree();
    start_ = Deadline::Clock::now();
    device();
    exchange();
    while (out_.error.empty() && round_.kind != RoundKind::done) one_round();
    out_.seconds = seconds_since(start_);
    // Every rank has read the last review before rank 0 (which may serve the
    // store) goes on to print and exit.
    if (out_.error.empty())
      plane_.gather_all("sweep-end", "", Deadline::after_seconds(o_.timeout_s), live());
    return std::move(out_);
  }

 private:
  bool judge() const { return me_.rank == 0; }

  void device() {
    CheckOptions co;
    co.backend = o_.backend;
    co.nccl_lib = o_.nccl_lib;
    choose_backend(co, s_.env, "host/tcp", me_);
    out_.backend = me_.backend;
    out_.nccl_version = me_.nccl_version;
    me_.phase = "device";
    // A call that cannot be given a deadline (cudaMalloc or cudaFree on a
    // hung GPU) ends the rank with its status line, not a silent hang.
    watchdog_.arm("device", Deadline::after_seconds(kDeviceLimitS));
    Disarm disarm{watchdog_};
    try {
      if (me_.backend == "nccl") {
        if (!me_.backend_why.empty()) throw Error(ExitCode::broken, me_.backend_why);
        auto cuda = probe_cuda();
        auto choice = choose_gpu(me_.local_rank, cuda.device_count, s_.env, o_.device);
        set_device(choice.ordinal);
        auto info = gpu_info(choice.ordinal);
        me_.gpu_ordinal = info.ordinal;
        me_.gpu_name = info.name;
        me_.gpu_bus_id = info.pci_bus_id;
        me_.gpu_uuid = info.uuid;
        test_device_memory(o_.mem_bytes ? o_.mem_bytes : kGpuMem, me_.rank);
        meter_ = make_nccl_pair_meter(o_.nccl_lib);
      } else {
        test_host_memory(o_.mem_bytes ? o_.mem_bytes : kHostMem, me_.rank, me_.host);
        meter_ = make_tcp_pair_meter(advertise_, token_);
      }
      me_.endpoint = meter_->endpoint();
    } catch (const Error& e) {
      me_.fail("device", e.one_line(), e.code() == ExitCode::timeout);
      spdlog::error("{} cannot take part in the sweep: {}", rank_label(me_), e.one_line());
    }
    try {
      me_.fingerprint =
          collect_fingerprint(live_sources(s_.env, me_.host, me_.gpu_ordinal, o_.nccl_lib));
    } catch (const std::exception& e) {
      spdlog::warn("rank {}: no fingerprint: {}", me_.rank, e.what());
    }
    spec_.bytes = o_.bytes ? o_.bytes : me_.backend == "nccl" ? kGpuBytes : kHostBytes;
    spec_.iters = o_.iters;
    spec_.timeout_s = o_.pair_timeout_s;
    out_.bytes = spec_.bytes;
  }

  void exchange() {
    auto review = [&](const Gathered& g) {
      std::vector<std::optional<RankRecord>> table(n_);
      std::vector<std::optional<std::string>> hosts(n_);
      std::vector<int> unnamable;  // arrived, with a host name a hostlist cannot hold
      std::vector<int> local_size(n_, -1);
      for (int r = 0; r < n_; ++r) {
        auto wrapped = parse(g.records[r]);
        if (!wrapped || !wrapped->contains("rec") || !(*wrapped)["rec"].is_string()) continue;
        const auto ls = wrapped->value("local_size", -1);
        if (ls >= 1 && ls <= 1024) local_size[r] = ls;
        try {
          table[r] = decode((*wrapped)["rec"].get<std::string>());
          if (table[r]->rank != r) continue;
          if (hostlist_ok(table[r]->host))
            hosts[r] = table[r]->host;
          else
            unnamable.push_back(r);
        } catch (const Error&) {
        }
      }
      Layout layout = make_layout(hosts);
      out_.ranks_per_node.clear();
      for (const auto& m : layout.members) out_.ranks_per_node.push_back(static_cast<int>(m.size()));
      const bool gpu = me_.backend == "nccl";
      planner_.emplace(layout, planner_options(gpu, o_.time_budget_s));
      std::set<std::string> seen(layout.hosts.begin(), layout.hosts.end());
      std::vector<std::string> absent;
      for (const auto& h : o_.expected_hosts)
        if (!seen.count(h)) absent.push_back(h);
      planner_->never_arrived(absent);
      std::vector<int> unknown;
      for (int r = 0; r < n_; ++r)
        if (!hosts[r] && std::find(unnamable.begin(), unnamable.end(), r) == unnamable.end())
          unknown.push_back(r);
      if (!unnamable.empty())
        out_.warnings.push_back("rank(s) " + compress_ranks(unnamable) +
                                " left out: their host names hold a space, comma, bracket or "
                                "control character, which no hostlist can name");
      if (!unknown.empty())
        out_.warnings.push_back("rank(s) " + compress_ranks(unknown) +
                                " never reached the sweep (their hosts are unknown here: pass "
                                "--hosts to name the pool's hosts)");
      json skip = json::array();
      for (int r = 0; r < n_; ++r)
        if (table[r] && !table[r]->ok && layout.node_of[r] >= 0) {
          const int node = layout.node_of[r];
          planner_->node_failed(node, rank_label(*table[r]) + " failed in " +
                                          table[r]->failed_phase + ": " + table[r]->reason);
          skip.push_back(node);
        }
      // A node whose launcher says it has L ranks, of which fewer arrived.
      for (int node = 0; node < layout.nodes(); ++node) {
        int expect = -1;
        std::set<int> locals;
        for (int r : layout.members[node]) {
          expect = std::max(expect, local_size[r]);
          if (table[r]) locals.insert(table[r]->local_rank);
        }
        if (expect <= static_cast<int>(layout.members[node].size())) continue;
        std::vector<int> absent_locals;
        for (int l = 0; l < expect; ++l)
          if (!locals.count(l)) absent_locals.push_back(l);
        planner_->node_failed(node, std::to_string(expect - static_cast<int>(layout.members[node].size())) +
                                        " of its " + std::to_string(expect) +
                                        " ranks never reached the sweep (local rank(s) " +
                                        compress_ranks(absent_locals) + ")");
        skip.push_back(node);
      }
      const auto checkpoint = review_table(table, table, g.missing, true);
      out_.fingerprint = checkpoint.fingerprint;
      for (const auto& c : checkpoint.conflicts) out_.warnings.push_back(c);
      for (const auto& w : checkpoint.warnings) out_.warnings.push_back(w);
      for (const auto& t : table)
        if (t && out_.gpu_name.empty()) out_.gpu_name = t->gpu_name;
      const Round first = planner_->next(seconds_since(start_));
      round_start_ = seconds_since(start_);
      return json{{"layout", encode_layout(layout)}, {"round", encode_round(first)}, {"skip", skip},
                  {"excluded", first.kind == RoundKind::done ? count_excluded() : -1},
                  {"report_host", me_.host}}
          .dump();
    };
    const json mine{{"rec", encode(me_)}, {"local_size", s_.world.local_size}};
    // Under node leaders rank 0 asks for every record, once, and reviews here.
    std::vector<int> every;
    if (tree_ && judge()) {
      every.resize(static_cast<std::size_t>(n_));
      std::iota(every.begin(), every.end(), 0);
    }
    auto g = plane_.gather_all("sweep-exchange", mine.dump(), Deadline::after_seconds(o_.timeout_s),
                               {}, every, review);
    mark_gone(g.missing);
    me_.fingerprint = {};
    if (tree_) {
      if (judge() && g.judged) plan_ = review(g);
      if (!receive_plan(true)) return;
    } else if (!read_review(g.judged, g.review, g.aborted, true)) {
      return;
    }
    if (judge()) {
      out_.layout = planner_->layout();
      out_.hosts = planner_->hosts();
      out_.tests = planner_->tests();
      out_.test_nodes = planner_->test_nodes();
      if (round_.kind == RoundKind::done) out_.verdicts = planner_->verdicts();
    }
  }

  /// Under node leaders: rank 0 sends its plan (plan_) as its record, which
  /// every digest carries; false (and out_.error) when none came.
  bool receive_plan(bool first) {
    auto g = plane_.gather_all("sweep-plan-" + std::to_string(++plans_), judge() ? plan_ : "",
                               Deadline::after_seconds(o_.timeout_s), live());
    mark_gone(g.missing);
    const bool planned = g.judged && g.records[0] && !g.records[0]->empty();
    return read_review(planned, g.records[0].value_or(""), g.aborted, first);
  }

  /// Applies the judge's review; false (and out_.error) when there is none.
  bool read_review(bool judged, const std::string& review, const std::optional<std::string>& aborted,
                   bool first) {
    if (!judged) {
      out_.error = "rank 0, which plans the sweep, did not answer at " +
                   std::string(first ? "the exchange" : "round " + std::to_string(round_.index)) +
                   (aborted ? " (" + *aborted + ")" : "");
      out_.timed_out = !aborted;
      return false;
    }
    try {
      const json j = json::parse(review);
      if (first) {
        layout_ = decode_layout(j.at("layout").get<std::string>(), n_);
        // Where the report and files will be, for the other nodes to say.
        if (auto h = j.find("report_host"); h != j.end() && h->is_string())
          out_.report_host = clean_text(h->get<std::string>().substr(0, 256));
      }
      round_ = decode_round(j.at("round").get<std::string>(), layout_.nodes());
      skip_.resize(layout_.nodes(), false);
      for (const auto& s : j.at("skip"))
        if (s.is_number_integer() && s.get<int>() >= 0 && s.get<int>() < layout_.nodes())
          skip_[s.get<int>()] = true;
      if (j.at("excluded").is_number_integer()) out_.excluded = j.at("excluded").get<int>();
    } catch (const std::exception& e) {
      out_.error = std::string("rank 0's sweep plan does not parse: ") + e.what();
      return false;
    }
    return true;
  }

  void mark_gone(const std::vector<int>& missing) {
    for (int r : missing)
      if (r >= 0 && r < n_ && r != me_.rank) gone_[r] = true;
  }

  std::vector<int> live() const {
    std::vector<int> v;
    for (int r = 0; r < n_; ++r)
      if (!gone_[r]) v.push_back(r);
    return v;
  }

  int my_partner() const {
    if (!me_.ok) return -1;
    const int p = partner_in(round_, layout_, me_.rank);
    if (p < 0 || gone_[p]) return -1;
    const int mine = layout_.node_of[me_.rank], theirs = layout_.node_of[p];
    if (mine < 0 || theirs < 0 || skip_[mine] || skip_[theirs]) return -1;
    return p;
  }

  void one_round() {
    const int partner = my_partner();
    const std::string k = std::to_string(round_.index);
    PairPeer mine{me_.rank, rank_label(me_), me_.endpoint, ""};
    if (partner > me_.rank && meter_) {
      try {
        mine.pair_id = meter_->make_pair_id();
      } catch (const Error& e) {
        spdlog::warn("{}: no NCCL id for round {}: {}", rank_label(me_), k, e.one_line());
      }
    }
    json peer{{"ep", mine.endpoint}, {"id", mine.pair_id}, {"label", mine.label}};
    auto g1 = plane_.gather_all("sweep-" + k + "-peers", peer.dump(),
                                Deadline::after_seconds(o_.timeout_s), live(),
                                partner >= 0 ? std::vector<int>{partner} : std::vector<int>{});
    mark_gone(g1.missing);
    // The pair's waits have deadlines; NCCL's abort, a communicator's
    // teardown or a cudaFree on a hung GPU have none: the watchdog ends the
    // rank after twice the pair's limit (the test hook fires inside it).
    watchdog_.arm("pool-round " + k, Deadline::after_seconds(2 * o_.pair_timeout_s + 10),
                  "the pair's NCCL or CUDA calls did not return (an abort or a teardown that "
                  "hangs, a hung GPU?): check nvidia-smi and dmesg on " + me_.host);
    std::optional<Disarm> disarm{std::in_place, watchdog_};
    hook_.on_iteration("pool-round", round_.index);
    PairOutcome result;
    if (partner >= 0) {
      auto theirs = parse(g1.records[partner]);
      if (gone_[partner] || !theirs) {
        result.why = "the partner did not reach round " + k;
      } else {
        PairPeer other{partner, text_field(*theirs, "label"), text_field(*theirs, "ep"),
                       text_field(*theirs, "id")};
        if (other.label.empty()) other.label = "rank " + std::to_string(partner);
        result = measure_pair(*meter_, mine, other, round_.index, spec_);
      }
    }
    disarm.reset();
    json rec{{"k", round_.index}, {"p", partner}, {"ok", result.ok}, {"gbps", result.gbps},
             {"why", result.why.substr(0, kMaxField)}};
    last_peers_ = g1;
    auto review = [&](const Gathered& g) { return judge_round(g, g1.missing); };
    auto g2 = plane_.gather_all("sweep-" + k, rec.dump(),
                                Deadline::after_seconds(o_.pair_timeout_s + o_.timeout_s), live(),
                                {}, review);
    mark_gone(g2.missing);
    if (!tree_) {
      read_review(g2.judged, g2.review, g2.aborted, false);
      return;
    }
    if (judge()) plan_ = g2.judged ? judge_round(g2, g1.missing) : "";
    receive_plan(false);
  }

  std::string judge_round(const Gathered& g, const std::vector<int>& missing_before) {
    // Both ends of each pair, folded: here from every rank's report, under
    // node leaders by the groups' judges and the root (tree_results.h).
    RoundResults folded(round_.index);
    if (!tree_) {
      for (int r = 0; r < n_; ++r)
        if (g.records[r]) folded.add_report(r, *g.records[r], n_);
    } else if (auto share = RoundResults::decode(g.judge_share, 0, n_ - 1, n_);
               share && share->round() == round_.index) {
      folded.add(*share);
    } else {
      spdlog::warn("sweep: no results of round {} reached rank 0 through the node leaders: its "
                   "pairs count as unreported", round_.index);
    }
    if (folded.cut())
      spdlog::warn("sweep: {} pair result(s) of round {} did not fit in the tree's summaries "
                   "(GPUDIAG_TREE_GROUP_NODES too large?): they count as unreported",
                   folded.cut(), round_.index);
    const std::vector<PairResult> results = folded.pair_results();
    const int pairs = static_cast<int>(results.size());
    std::vector<int> gone = missing_before;
    gone.insert(gone.end(), g.missing.begin(), g.missing.end());
    planner_->record(round_, results, gone);
    for (const Gathered* gathered : {&g, static_cast<const Gathered*>(&last_peers_)})
      for (int r : gathered->missing)
        if (r >= 0 && r < static_cast<int>(gathered->notes.size()))
          planner_->note_gone(r, clean_text(gathered->notes[r]).substr(0, kMaxField));
    json skip = json::array();
    for (int r : gone)
      if (r >= 0 && r < n_ && layout_.node_of[r] >= 0) skip.push_back(layout_.node_of[r]);
    const double now = seconds_since(start_);
    out_.rounds.push_back({round_.index, round_.stage(), pairs, now - round_start_});
    round_start_ = now;
    const Round next = planner_->next(now);
    progress_line(results, now, next);
    if (next.kind == RoundKind::done) {
      out_.verdicts = planner_->verdicts();
      out_.layout = planner_->layout();
      out_.hosts = planner_->hosts();
      out_.tests = planner_->tests();
      out_.test_nodes = planner_->test_nodes();
    }
    return json{{"round", encode_round(next)}, {"skip", skip},
                {"excluded", next.kind == RoundKind::done ? count_excluded() : -1}}
        .dump();
  }

  /// The judge's line per round on stderr: a sweep of minutes is not silent.
  void progress_line(const std::vector<PairResult>& results, double now, const Round& next) {
    const auto failed = std::count_if(results.begin(), results.end(),
                                      [](const PairResult& r) { return !r.ok; });
    std::string line = "sweep: round " + std::to_string(round_.index) + " (" + round_.stage() +
                       "): " + std::to_string(results.size()) + " pair(s) in " +
                       human_seconds(out_.rounds.back().seconds);
    if (failed) line += ", " + std::to_string(failed) + " failed";
    line += next.kind == RoundKind::done
                ? "; judged after " + human_seconds(now)
                : "; next: round " + std::to_string(next.index) + " (" + next.stage() + ")";
    write_all(STDERR_FILENO, line + "\n");
  }

  int count_excluded() const {
    int n = 0;
    for (const auto& v : planner_->verdicts()) n += v.state != NodeState::ok;
    return n;
  }

  static bool hostlist_ok(const std::string& h) {
    if (h.empty() || h.size() > 255) return false;
    for (unsigned char c : h)
      if (c <= ' ' || c == ',' || c == '[' || c == ']' || c == 0x7f) return false;
    return true;
  }

  const SweepOptions& o_;
  CheckSetup& s_;
  Plane& plane_;
  std::string advertise_, token_;
  int n_ = 0;
  RankRecord me_;
  SweepOutcome out_;
  struct Disarm {
    Watchdog& w;
    ~Disarm() { w.disarm(); }
  };
  static constexpr double kDeviceLimitS = 300;
  std::unique_ptr<PairMeter> meter_;
  PairSpec spec_;
  Deadline::Clock::time_point start_;
  double round_start_ = 0;
  std::optional<Planner> planner_;  ///< the judge's
  Layout layout_;
  Round round_;
  Watchdog watchdog_;
  std::vector<bool> gone_, skip_;
  TestHook hook_;
  Gathered last_peers_;  ///< this round's sweep-K-peers checkpoint, for the judge's notes
  bool tree_ = false;     ///< judged by node leaders (see the top of this file)
  std::string plan_;      ///< (rank 0, tree) the plan it sends next
  int plans_ = 0;
};

}  // namespace

SweepOutcome run_sweep(const SweepOptions& options, CheckSetup& setup,
                       const std::string& advertise_host, const std::string& token) {
  return SweepRun(options, setup, advertise_host, token).run();
}

std::vector<std::string> excluded_hosts(const SweepOutcome& o) {
  std::vector<std::string> out;
  for (const auto& v : o.verdicts)
    if (v.state != NodeState::ok && v.node >= 0 && v.node < static_cast<int>(o.hosts.size()))
      out.push_back(o.hosts[v.node]);
  return out;
}

}  // namespace gpudiag::sweep
