// The check's phases (see check.h), run as a fixed pipeline of named passes:
// backend choice (backend_choice.h), device and memory (memory_checks.h),
// the exchange, the communicator, the verified collectives
// (collective_checks.h), bench's sweep or link test, and the barrier, each
// followed by a checkpoint at which the ranks learn who is still with them.
#include "checks/check.h"
#include "checks/peer_book.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "checks/backend_choice.h"
#include "checks/collective_checks.h"
#include "checks/link_run.h"
#include "checks/memory_checks.h"
#include "checks/nccl_root_ids.h"
#include "checks/links.h"
#include "checks/test_hook.h"
#include "checks/verdict.h"
#include "checks/watchdog.h"
#include "comm/communicator.h"
#include "comm/nccl.h"
#include "gpu/cuda.h"
#include "gpu/cuda_ops.h"
#include "util/error.h"
#include "util/strings.h"
#include "world/fingerprint.h"
#include "world/gpu_choice.h"

namespace gpudiag {

namespace {

/// After a rank is known missing, later checkpoints only wait this long: the
/// live ranks are all at the same point, and the missing one is not coming.
constexpr double kDegradedWaitS = 3.0;
/// The communicator's teardown: ncclCommFinalize may take 10 s (then it is
/// aborted); past this the watchdog ends the rank with its status line.
constexpr double kTeardownLimitS = 45.0;
/// --mem defaults: GPU memory is what is under test; on the host backend the
/// memory phase only proves the rank can allocate, so it stays small.
constexpr std::uint64_t kDefaultDeviceMem = 256ull << 20;
constexpr std::uint64_t kDefaultHostMem = 16ull << 20;
/// The link test's turns wait up to this many --timeout for the turn before:
/// a pair takes at most its first exchange (< --timeout) plus the greater
/// of that and --timeout / 4.
constexpr double kLinkWaitFactor = 3.0;

class CheckRun {
 public:
  CheckRun(const CheckOptions& o, CheckSetup& s)
      : opt_(o),
        setup_(s),
        plane_(*s.plane),
        watchdog_(s.host + "-" + std::to_string(s.world.local_rank)),
        test_hook_(TestHook::from_env(s.env, s.world.rank)) {
    const int n = plane_.size();
    for (int r = 0; r < n; ++r) result_.live.push_back(r);
    result_.table.resize(n);
    result_.last_seen.resize(n);
    result_.missed_at.resize(n);
    result_.missing_note.resize(n);
    auto& me = result_.me;
    me.rank = s.world.rank;
    me.world_size = s.world.size;
    me.local_rank = s.world.local_rank;
    me.host = s.host;
    me.pid = static_cast<int>(getpid());
    me.host_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    me.launcher = launcher_id(s.world.launcher);
    me.mpi_version = s.mpi_version;
    result_.store_unauthenticated = s.store_unauthenticated;
    result_.warnings = s.world.warnings;
  }

  CheckResult run() {
    choose_backend(opt_, setup_.env,
                   setup_.host_transport ? setup_.host_transport->name() : "host", me());
    timed("device", [&] { device(); });
    fingerprint();
    checkpoint("exchange", [&] { after_exchange(); });
    me().fingerprint = {};  // compared at the exchange, where the NCCL ids were read too:
    me().nccl_id.clear();   // later records stay small
    timed("communicator", [&] { communicator(); });
    checkpoint("communicator", [] {});
    timed("all-reduce", [&] { all_reduce(); });
    checkpoint("all-reduce", [] {});
    if (opt_.bench) {
      timed("sweep", [&] { sweep(); });
      checkpoint("sweep", [] {});
    }
    if (opt_.link_bytes > 0) {
      timed("links", [&] { links(); });
      checkpoint("links", [] {});
    }
    timed("barrier", [&] { comm_->barrier(wait_deadline()); });
    checkpoint("barrier", [] {});
    if (comm_ && comm_->buffers_in_flight()) {
      // The library may still write into the workspace: keep it for good,
      // and do not let MPI_Finalize wait for a transfer that will not end.
      (void)workspace_.release();
      result_.abandon_transport = true;
    }
    close_communicator();  // finalize/abort the communicator before reporting
    result_.death = plane_.peer_death();
    return std::move(result_);
  }

 private:
  RankRecord& me() { return result_.me; }

  /// Finalize or abort under the watchdog: a teardown that hangs (a known
  /// class of NCCL bug, or a hung GPU) ends the rank with its status line
  /// instead of leaving it running.
  void close_communicator() {
    watchdog_.arm("teardown", Deadline::after_seconds(kTeardownLimitS));
    comm_.reset();
    workspace_.reset();
    device_.reset();
    watchdog_.disarm();
  }
  double wait_seconds() const {
    return degraded_ ? std::min(kDegradedWaitS, opt_.timeout_s) : opt_.timeout_s;
  }
  Deadline wait_deadline() const {
    return Deadline::after_seconds(degraded_ ? std::min(kDegradedWaitS, opt_.timeout_s)
                                             : opt_.timeout_s);
  }

  /// Runs `work` for `phase` unless this rank already stopped; records time and failure.
  template <class F>
  void timed(const char* phase, F work) {
    me().phase = phase;
    plane_.note_phase(phase);
    test_hook_.on_phase(phase);  // GPUDIAG_TEST_RAISE (test_hook.h)
    if (!me().ok) return;
    spdlog::debug("entering the {} phase", phase);
    auto t0 = Deadline::Clock::now();
    // Waits on peers have their own deadlines; this catches the calls that
    // cannot have one. A phase may wait on peers once per iteration, hence
    // the generous limit.
    // bench's size sweep is not `gpudiag sweep`: the watchdog's words say which.
    watchdog_.arm(std::string(phase) == "sweep" ? "bench size sweep" : phase,
                  Deadline::after_seconds(watchdog_limit_s(phase)));
    struct Disarm {
      Watchdog& w;
      ~Disarm() { w.disarm(); }
    } disarm{watchdog_};
    try {
      work();
    } catch (const Error& e) {
      std::string why = e.one_line();
      // A lost connection is often a peer's death that its launcher is about
      // to announce: give that a moment, since it says who and how.
      if (e.code() != ExitCode::timeout && comm_) {
        auto until = Deadline::after(std::chrono::seconds(1));
        std::optional<std::string> death;
        while (!(death = plane_.peer_death()) && !until.expired())
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (death) why = why.find(*death) != std::string::npos ? *death : *death + "; here: " + why;
        // No death, but the store may have stopped, and a peer that saw it
        // first has quit (its connections closed): the store is the cause.
        else if (auto lost = plane_.lost_plane())
          why = why.find(*lost) != std::string::npos ? *lost : *lost + "; here: " + why;
      }
      me().fail(phase, why, e.code() == ExitCode::timeout);
      plane_.announce_failure(rank_label(me()) + " failed in " + phase + ": " + why);
    }
    me().seconds[phase] = seconds_since(t0);
  }

  double watchdog_limit_s(const std::string& phase) const {
    const double per_wait = opt_.timeout_s;
    if (phase != "links") return per_wait * (2 + opt_.warmup + opt_.iters) + 60;
    // Each turn: up to kLinkWaitFactor x --timeout at its barrier, and the
    // pair's own exchanges (a first one, the count, and a quarter of --timeout).
    const double n = plane_.size();
    const double turns = links_serial() ? n * (n - 1) / 2 : link_rounds(plane_.size());
    return per_wait * (kLinkWaitFactor + 3) * turns + 60;
  }

  bool links_serial() const {
    return opt_.link_schedule == "serial" ||
           (opt_.link_schedule == "auto" && oversubscribed_);
  }

  void device() {
    if (me().backend == "nccl") {
      // Both missing pieces in one line: a user fixes them in one go.
      if (!me().backend_why.empty()) throw Error(ExitCode::broken, me().backend_why);
      auto cuda = probe_cuda();
      auto choice = choose_gpu(me().local_rank, cuda.device_count, setup_.env, opt_.device);
      set_device(choice.ordinal);
      auto info = gpu_info(choice.ordinal);
      me().gpu_ordinal = info.ordinal;
      me().gpu_name = info.name;
      me().gpu_bus_id = info.pci_bus_id;
      me().gpu_uuid = info.uuid;
      test_device_memory(opt_.mem_bytes ? opt_.mem_bytes : kDefaultDeviceMem, me().rank);
      // One stream for every copy and collective: they are then ordered.
      device_ = std::make_shared<DeviceContext>();
      const CudaOps& ops = cuda_ops();
      const int e = ops.memset_async(device_->scratch.get(), 0, sizeof(float),
                                     device_->stream.handle());
      if (e != CudaOps::kSuccess)
        throw Error(ExitCode::broken, "cudaMemsetAsync failed: " + cuda_error_text(ops, e));
      wait_stream(ops, device_->stream.handle(), "clearing the barrier's buffer",
                  Deadline::after_seconds(opt_.timeout_s));
      workspace_ = make_device_workspace(ops, device_->stream.handle(), device_);
      make_nccl_root_id(me(), load_nccl(opt_.nccl_lib), setup_.env, opt_.nccl_roots);
    } else {
      if (!setup_.host_transport)
        throw Error(ExitCode::usage, "the host backend needs MPI or the rendezvous store here");
      test_host_memory(opt_.mem_bytes ? opt_.mem_bytes : kDefaultHostMem, me().rank, me().host);
      workspace_ = make_host_workspace();
      me().endpoint = setup_.host_transport->prepare();
    }
  }

  /// Publishes this rank's record and decides whether it can go on. Rank 0
  /// (the plane's judge) reviews the whole table; the others read its review
  /// and the few records they need (see plane.h), or, when rank 0 is missing,
  /// every record and review it themselves.
  template <class F>
  void checkpoint(const char* name, F extra_review) {
    auto t0 = Deadline::Clock::now();
    auto deadline = wait_deadline();
    const bool exchange = std::string(name) == "exchange";
    if (exchange) {  // a phase of its own for the peers' reports and the test hook
      me().phase = name;
      plane_.note_phase(name);
      test_hook_.on_phase(name);  // GPUDIAG_TEST_RAISE (test_hook.h)
    }
    auto judge = [&](const Gathered& g) {
      return encode_review(review_table(decoded(g), table_lookup(), g.missing, exchange));
    };
    std::vector<int> need = exchange ? exchange_needs() : std::vector<int>{};
    if (std::string(name) == "barrier" && me().rank == 0) {
      // The report's table: every rank's last record (a judge has them; a
      // rank under node leaders asks for them).
      need.resize(plane_.size());
      for (int r = 0; r < plane_.size(); ++r) need[r] = r;
    }
    auto gathered = plane_.gather_all(name, encode(me()), deadline, result_.live, need, judge);
    review_ = read_review(gathered, exchange);
    if (me().rank != 0 && gathered.judged)
      result_.judged_all_ok = review_.failed == 0 && gathered.complete();
    else
      result_.judged_all_ok.reset();
    if (exchange) {
      oversubscribed_ = review_.oversubscribed;
      result_.fingerprint = review_.fingerprint;
    }
    const double waited = seconds_since(t0);
    std::vector<std::string> problems, missing;
    bool peer_timeout = false;
    note_checkpoint(result_, gathered, name);  // a missing rank keeps where it was last seen
    // A line for each of the first missing ranks; the rest only count (the
    // reason names the first and how many more: thousands of lines would
    // cost megabytes on every rank of a job whose digest came late).
    constexpr std::size_t kWorded = 64;
    for (std::size_t i = 0; i < gathered.missing.size(); ++i) {
      const int r = gathered.missing[i];
      if (r == me().rank || r < 0 || r >= plane_.size()) continue;
      degraded_ = true;
      peer_timeout = peer_timeout || !gathered.aborted;
      if (problems.size() >= kWorded) {
        problems.emplace_back();
        missing.emplace_back();
        continue;
      }
      std::string note =
          static_cast<std::size_t>(r) < gathered.notes.size() ? gathered.notes.at(r) : "";
      if (note.empty())
        note = result_.last_seen.at(r).empty()
                   ? "never heard from: not started, or cannot reach " + plane_.describe()
                   : "last seen at the " + result_.last_seen.at(r) + " checkpoint";
      const std::string label = label_of(r);
      problems.push_back(label + " did not reach the " + name + " checkpoint" +
                         (gathered.aborted ? "" : " within " + human_seconds(waited)) + " (" +
                         note + ")");
      if (me().reason.rfind(label, 0) != 0)  // unless the reason leads with it
        missing.push_back(problems.back());
    }
    if (gathered.missing_unlisted > 0) {
      // Past the digest's bound the judge lists the first ranges and counts
      // the rest (rendezvous/checkpoint_digest.h): say how many, and that the
      // list is cut.
      degraded_ = true;
      peer_timeout = peer_timeout || !gathered.aborted;
      const auto all =
          gathered.missing.size() + static_cast<std::size_t>(gathered.missing_unlisted);
      const std::string cut =
          std::to_string(all) + " ranks did not reach the " + name +
          " checkpoint; the judge's list is cut: " + std::to_string(gathered.missing_unlisted) +
          " of them are not named here (the first " + std::to_string(gathered.missing.size()) +
          " are)";
      problems.insert(problems.begin(), cut);
      missing.insert(missing.begin(), cut);
    }
    // The judge names a few failed ranks and counts the rest.
    std::vector<std::string> failed;
    int named = 0;
    for (const auto& [r, line] : review_.failures) {
      ++named;
      if (r != me().rank) failed.push_back(line);
    }
    if (review_.failed > named)
      failed.push_back(std::to_string(review_.failed - named) + " more ranks failed");
    problems.insert(problems.begin(), failed.begin(), failed.end());
    // An announced failure (a peer's, or the launcher's report of a death)
    // explains the missing ranks better than the silence does.
    if (gathered.aborted && !gathered.complete())
      problems.insert(problems.begin(), *gathered.aborted);
    // The exchange is only a checkpoint; the others time their own work too.
    me().seconds[std::string(name) == "exchange" ? "exchange" : std::string(name) + " wait"] =
        waited;
    if (me().ok && problems.empty()) extra_review();
    if (me().ok && !problems.empty())
      me().fail(name, "stopped at the " + std::string(name) + " checkpoint: " + one_line(problems),
                peer_timeout);
    else if (!me().ok && !missing.empty() && me().failed_phase == name && is_collective(name) &&
             waited_on_peers() && result_.live.size() > 1) {
      // A collective that timed out names the peer this rank waited on, who
      // may be waiting too; the rank that never reaches the checkpoint is the
      // one to look at. (Not when this rank failed on its own, nor when the
      // plane heard from nobody else: then everyone looks missing.)
      me().reason = one_line(missing) + "; here: " + me().reason;
      if (auto& mine = result_.table[me().rank]) mine->reason = me().reason;
    }
  }

  /// This rank's failure was a wait on peers: a timeout, or a wait given up
  /// because a peer reported failing (every backend says "abandoned: ").
  bool waited_on_peers() const {
    return result_.me.timed_out || result_.me.reason.find("abandoned: ") != std::string::npos;
  }

  static bool is_collective(const std::string& phase) {
    for (const char* p : {"communicator", "all-reduce", "sweep", "links", "barrier"})
      if (phase == p) return true;
    return false;
  }

  /// This rank's fingerprint, for the exchange's comparison. Never fails the
  /// rank: what cannot be read is "unknown".
  void fingerprint() {
    try {
      me().fingerprint =
          collect_fingerprint(live_sources(setup_.env, me().host, me().gpu_ordinal, opt_.nccl_lib));
      // Kept past the exchange: the bandwidth verdict asks whether the job's
      // nodes share one NVLink domain.
      if (const auto d = me().fingerprint.get("gpu.nvlink_domain"); d.find('/') != std::string::npos)
        me().nvlink_domain = d;
    } catch (const std::exception& e) {
      spdlog::warn("rank {}: no fingerprint: {}", me().rank, e.what());
    }
  }

  void after_exchange() {
    if (!review_.conflicts.empty()) me().fail("exchange", one_line(review_.conflicts));
    for (auto& w : review_.warnings) result_.warnings.push_back(w);
  }

  /// This checkpoint's records, decoded (nullopt for the missing and the
  /// records this rank did not read).
  static std::vector<std::optional<RankRecord>> decoded(const Gathered& g) {
    std::vector<std::optional<RankRecord>> out(g.records.size());
    for (std::size_t r = 0; r < g.records.size(); ++r)
      if (const auto& rec = g.records.at(r)) out[r] = decode(*rec);
    return out;
  }

  /// The judge's review; this rank's own when there was no judge (then the
  /// plane read every record).
  CheckpointReview read_review(const Gathered& g, bool exchange) {
    if (g.judged) try {
        return decode_review(g.review);
      } catch (const std::exception& e) {
        spdlog::warn("rank {}: rank 0's review of the checkpoint does not parse ({}); "
                     "judging from the records read",
                     me().rank, e.what());
      }
    return review_table(decoded(g), table_lookup(), g.missing, exchange);
  }

  /// The table as it was, for the labels of ranks now missing.
  std::function<const RankRecord*(int)> table_lookup() const {
    return [this](int r) -> const RankRecord* {
      if (r < 0 || r >= static_cast<int>(result_.table.size())) return nullptr;
      const auto& rec = result_.table.at(r);
      return rec ? &*rec : nullptr;
    };
  }

  /// "rank 3 [node2-1]" from what this rank knows, or the judge's label.
  std::string label_of(int r) const {
    if (const auto& rec = result_.table.at(r)) return rank_label(*rec);
    for (const auto& [rank, label] : review_.labels)
      if (rank == r) return label;
    return rank_label(r, std::nullopt);
  }

  /// The records this rank reads at the exchange besides the digest: rank 0's
  /// (its NCCL id; other roots' come in the review), its host/tcp ring
  /// neighbours and halving partners, or every rank's for the link test's mesh.
  std::vector<int> exchange_needs() const {
    const int n = plane_.size(), r = result_.me.rank;
    std::vector<int> need;
    if (result_.me.backend == "nccl") return {0};
    if (result_.me.backend != "host/tcp") return {};
    if (opt_.link_bytes > 0 || (opt_.bench && opt_.bench->coll == Coll::alltoall)) {
      for (int p = 0; p < n; ++p) need.push_back(p);
      return need;
    }
    need = {(r + 1) % n, (r + n - 1) % n};
    if (n >= 4 && (n & (n - 1)) == 0)
      for (int k = 0; (1 << k) < n; ++k) need.push_back(r ^ (1 << k));
    return need;
  }

  void communicator() {
    auto abort_check = [this] { return plane_.peer_failure(); };
    if (me().backend == "nccl") {
      NcclContext ctx;
      ctx.nccl = load_nccl(opt_.nccl_lib).api;
      ctx.cuda = &cuda_ops();
      ctx.stream = device_->stream.handle();
      ctx.scratch = static_cast<float*>(device_->scratch.get());
      ctx.owner = device_;
      comm_ = make_nccl_communicator(ctx, nccl_init_ids(me(), result_.table.at(0), review_.nccl_ids),
                                     me().rank, plane_.size(), wait_deadline(), abort_check);
    } else {
      // Only the records exchange_needs() asked for are known here; the
      // transport never reads the others.
      std::vector<RankRecord> peers;
      const int n = plane_.size(), r = me().rank;
      for (int i = 0; i < n; ++i) {
        if (const auto& rec = result_.table.at(i)) {
          peers.push_back(*rec);
          continue;
        }
        // A TCP ring neighbour's record must be here: the digest promised it
        // (exchange_needs; MPI's collectives need no endpoints).
        if (me().backend == "host/tcp" && n > 1 && (i == (r + 1) % n || i == (r + n - 1) % n))
          throw Error(ExitCode::broken,
                      "the record of rank " + std::to_string(i) +
                          ", this rank's ring neighbour, did not arrive with the checkpoint's "
                          "digest (short, or forged by a process that is not the judge)",
                      "run the job with GPUDIAG_SECRET (or under gpudiag launch) so only its own "
                      "processes write the store");
        RankRecord unknown;
        unknown.rank = i;
        unknown.endpoint = "not-read:0";
        peers.push_back(unknown);
      }
      // A peer that dies while the ring connects is announced: stop waiting then.
      comm_ = setup_.host_transport->connect(peers, me().rank, wait_deadline(), abort_check);
      comm_->set_abort_check(abort_check);
    }
  }

  void all_reduce() {
    const CollectiveChecks checks{*comm_, *workspace_, me().rank, plane_.size(), wait_seconds()};
    checks.all_reduce(opt_.small_bytes);
    float* large = checks.all_reduce(opt_.large_bytes);
    time_large(large, opt_.large_bytes / sizeof(float));
    checks.all_gather_and_broadcast(opt_.small_bytes);
  }

  void time_large(float* buf, std::size_t n) {
    // With the link test, --iters is the pairs' count; one timed all-reduce will do here.
    const int iters = opt_.link_bytes > 0 ? std::min(opt_.iters, 1) : opt_.iters;
    if (iters <= 0) return;
    // Each iteration timed by the backend: NCCL between two CUDA events on
    // the device, the host backends on the host's clock.
    double seconds = 0;
    for (int i = 0; i < iters; ++i) {
      test_hook_.on_iteration("all-reduce", i + 1);
      seconds += comm_->all_reduce_timed(buf, n, 1, wait_deadline());
    }
    me().allreduce_bytes = static_cast<double>(n * sizeof(float));
    me().allreduce_seconds = seconds / iters;
  }

  /// gpudiag bench's measurement (bench/engine.h). Peers start each size
  /// together (the engine's barrier), so a slow rank shows in everyone's times.
  void sweep() {
    if (opt_.bench->coll == Coll::alltoall) comm_->open_links(wait_deadline());
    BenchContext ctx{*comm_, *workspace_, me().rank, plane_.size(), wait_seconds(), nullptr};
    if (me().rank == 0 && opt_.bench_start) ctx.sink = opt_.bench_start(result_.table);
    run_bench(*opt_.bench, ctx);
  }

  /// The link test (link_run.h).
  void links() {
    LinkRun run{*comm_, *workspace_, me(), plane_.size(), opt_.iters, opt_.warmup,
                opt_.timeout_s, opt_.link_bytes, links_serial(), kLinkWaitFactor};
    run_link_test(run);
  }

  const CheckOptions& opt_;
  CheckSetup& setup_;
  Plane& plane_;
  Watchdog watchdog_;
  TestHook test_hook_;
  CheckResult result_;
  bool degraded_ = false;
  CheckpointReview review_;      ///< the last checkpoint's, from the judge
  bool oversubscribed_ = false;  ///< from the exchange's review
  /// The GPU's stream and the barrier's scratch float, shared by the
  /// workspace and the communicator (each keeps it alive).
  struct DeviceContext {
    Stream stream;
    DeviceBuffer scratch{sizeof(float)};
  };
  std::shared_ptr<DeviceContext> device_;
  std::unique_ptr<Workspace> workspace_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace

CheckResult run_check(const CheckOptions& options, CheckSetup& setup) {
  return CheckRun(options, setup).run();
}

}  // namespace gpudiag
