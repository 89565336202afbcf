// The check's phases (see check.h), run as a fixed pipeline of named passes:
// backend choice (backend_choice.h), device and memory (memory_checks.h),
// the compute phase (compute/run.h), the exchange, the communicator, the verified collectives
// (collective_checks.h), bench's sweep or link test, a second read of the
// node's hardware evidence and the barrier, each followed by a checkpoint at
// which the ranks learn who is still with them (the hardware read shares the
// barrier's).
// Here: the pipeline, the timing and watchdog of a phase, and the checkpoint;
// the phases' own work is in check_phases.cpp.
#include "checks/check.h"

#include "checks/check_run.h"

namespace gpudiag {

namespace check_run {

CheckResult CheckRun::run() {
  choose_backend(opt_, setup_.env, setup_.host_transport ? setup_.host_transport->name() : "host",
                 me());
  timed("device", [&] { device(); });
  if (opt_.compute) timed("compute", [&] { compute(); });
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
  // What the hardware did during the check, before the last collective: a
  // rank it fails announces that, and its peers leave the barrier at once
  // (stopped by it), so rank 0's report and every status line agree.
  timed("hardware", [&] { hardware(); });
  timed("barrier", [&] { comm_->barrier(wait_deadline()); });
  checkpoint("barrier", [] {});
  settle_compute();
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

/// Finalize or abort under the watchdog: a teardown that hangs (a known
/// class of NCCL bug, or a hung GPU) ends the rank with its status line
/// instead of leaving it running.
void CheckRun::close_communicator() {
  watchdog_.arm("teardown", Deadline::after_seconds(kTeardownLimitS));
  comm_.reset();
  workspace_.reset();
  device_.reset();
  watchdog_.disarm();
}

/// Runs `work` for `phase` unless this rank already stopped; records time and failure.
void CheckRun::timed(const char* phase, const std::function<void()>& work) {
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

double CheckRun::watchdog_limit_s(const std::string& phase) const {
  const double per_wait = opt_.timeout_s;
  if (phase == "compute") return 3 * compute_seconds() + 120;  // no peers: its own budget
  if (phase != "links") return per_wait * (2 + opt_.warmup + opt_.iters) + 60;
  // Each turn: up to kLinkWaitFactor x --timeout at its barrier, and the
  // pair's own exchanges (a first one, the count, and a quarter of --timeout).
  const double n = plane_.size();
  const double turns = links_serial() ? n * (n - 1) / 2 : link_rounds(plane_.size());
  return per_wait * (kLinkWaitFactor + 3) * turns + 60;
}

/// Publishes this rank's record and decides whether it can go on. Rank 0
/// (the plane's judge) reviews the whole table; the others read its review
/// and the few records they need (see plane.h), or, when rank 0 is missing,
/// every record and review it themselves.
void CheckRun::checkpoint(const char* name, const std::function<void()>& extra_review) {
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
                       (gathered.aborted ? "" : " within " + human_seconds(waited)) + " (" + note +
                       ")");
    if (me().reason.rfind(label, 0) != 0)  // unless the reason leads with it
      missing.push_back(problems.back());
  }
  if (gathered.missing_unlisted > 0) {
    // Past the digest's bound the judge lists the first ranges and counts
    // the rest (plane/checkpoint_digest.h): say how many, and that the
    // list is cut.
    degraded_ = true;
    peer_timeout = peer_timeout || !gathered.aborted;
    const auto all = gathered.missing.size() + static_cast<std::size_t>(gathered.missing_unlisted);
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
  me().seconds[std::string(name) == "exchange" ? "exchange" : std::string(name) + " wait"] = waited;
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

}  // namespace check_run

using check_run::CheckRun;

CheckResult run_check(const CheckOptions& options, CheckSetup& setup) {
  return CheckRun(options, setup).run();
}

}  // namespace gpudiag
