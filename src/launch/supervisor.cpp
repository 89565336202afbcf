#include "launch/supervisor.h"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "hw/evidence.h"
#include "hw/kernel_note.h"
#include "launch/job_status.h"
#include "launch/stacks.h"
#include "launch/summary.h"
#include "launch/supervisor_detail.h"
#include "launch/verdict_file.h"
#include "util/error.h"

namespace gpudiag::launch {

using supervisor_detail::ranks_phrase;
using supervisor_detail::seconds;

namespace {

constexpr auto kGiveUpAfterKill = std::chrono::seconds(5);
constexpr auto kDrainAfterLastExit = std::chrono::seconds(2);
/// Even with nothing to wake it, the loop re-checks children this often, in
/// case a SIGCHLD was coalesced with another.
constexpr int kPollCapMs = 500;
/// Reads (64 KiB each) taken from a dead child's pipes before reporting it.
constexpr int kDrainReadsOnExit = 64;
}  // namespace

Supervisor::Supervisor(std::vector<RankProcess> ranks, bool prefix, StopPolicy policy,
                       LaunchObserver& observer, SignalPipe& signals)
    : policy_(policy), observer_(observer), signals_(signals), progress_(policy.hang_timeout_s) {
  started_usec_ = hw::usec_since_boot();
  slots_.reserve(ranks.size());
  for (auto& r : ranks) {
    auto tag = prefix ? rank_prefix(r.rank) : std::string();
    auto out = r.child.take_stdout();
    auto err = r.child.take_stderr();
    slots_.push_back(Slot{r.rank,
                          r.local_rank,
                          std::move(r.child),
                          Relay(std::move(out), r.bare_stdout ? std::string() : tag, out_),
                          Relay(std::move(err), tag, err_),
                          std::nullopt,
                          false,
                          false,
                          0,
                          std::nullopt,
                          false,
                          r.stack_file,
                          r.progress_file,
                          r.verdict_file,
                          {}});
    if (r.out_log || !r.out_console) slots_.back().out.copy_to(r.out_log, r.out_console);
    if (r.err_log || !r.err_console) slots_.back().err.copy_to(r.err_log, r.err_console);
  }
  if (policy_.timeout_s > 0) job_deadline_ = Deadline::after_seconds(policy_.timeout_s);
}

Supervisor::~Supervisor() = default;

int Supervisor::run() {
  for (;;) {
    reap();
    if (all_ended()) {
      if (!drain_until_) drain_until_ = Deadline::after(kDrainAfterLastExit);
      if (!any_output_open() || drain_until_->expired()) break;
    }
    act_on_deadlines();
    watch_exits();
    watch_progress();
    answer_stack_request();
    watch_ras();
    // Also while stopping: ranks may see the same fault (their WORLD_SIZE
    // differs) and fail before the observer's verdict; the verdict still wins.
    if (!stopped_for_ && !interrupted_by_)
      if (auto why = observer_.stop_reason()) stop_for(*why);
    if (gave_up_) break;
    poll_once();
  }
  if (failure_ras_) finish_ras(std::move(failure_ras_));
  for (auto& s : slots_) s.out.close(), s.err.close();

  auto ends = outcomes();
  int status =
      job_exit_status(ends, {interrupted_by_, timed_out_ || exit_timed_out_ || hung_, gave_up_});
  if (status != 0 && !stopped_for_ && !interrupted_by_) {
    // Every rank ended before the verdict came: ask once more, synchronously.
    std::optional<std::string> why;
    try {
      why = observer_.final_stop_reason();
    } catch (const std::exception& e) {
      spdlog::debug("launch: the observer's last word failed: {}", e.what());
    }
    if (why) stop_for(*why);
  }
  if (stopped_for_ && !interrupted_by_) status = static_cast<int>(ExitCode::usage);
  say(job_summary(ends, summary_note(status)));
  return status;
}

bool Supervisor::restartable() const {
  return (first_failure_ || hung_) && !stopped_for_ && !interrupted_by_ && !timed_out_ &&
         !exit_timed_out_ && !gave_up_;
}

std::optional<ExitStatus> Supervisor::first_failure_status() const {
  if (!first_failure_) return std::nullopt;
  return slots_[*first_failure_].status;
}

pid_t Supervisor::first_failed_pid() const {
  return first_failure_ ? slots_[*first_failure_].child.pid() : 0;
}

int Supervisor::first_failed_local_rank() const {
  return first_failure_ ? static_cast<int>(*first_failure_) : -1;
}

std::string Supervisor::failure() const {
  if (!first_failure_)
    return hung_ ? "the job hung (--hang-timeout " + seconds(policy_.hang_timeout_s) + ")"
                 : std::string();
  const auto& s = slots_[*first_failure_];
  return "rank " + std::to_string(s.rank) + " " + (s.status ? s.status->describe() : "failed");
}

std::vector<RankOutcome> Supervisor::outcomes() const {
  std::vector<RankOutcome> out;
  out.reserve(slots_.size());
  for (const auto& s : slots_)
    out.push_back({s.rank, s.status, s.first_failure, s.stopped_by_launcher, s.killed_by_launcher(),
                   s.verdict});
  return out;
}

void Supervisor::reap() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& s = slots_[i];
    if (s.status) continue;
    if (auto status = s.child.try_reap()) {
      s.status = *status;
      on_exit(i);
    }
  }
}

void Supervisor::on_exit(std::size_t index) {
  auto& s = slots_[index];
  // Its last words first, then the launcher's account of its death.
  s.out.drain(kDrainReadsOnExit);
  s.err.drain(kDrainReadsOnExit);
  // Exit 1 with a verdict written is the subcommand's answer, not a failure.
  if (!s.status->signaled && s.status->value == 1)
    if (auto v = read_verdict(s.verdict_file)) s.verdict = *v;
  if (hung_) s.stopped_by_launcher = true;  // ended while the hung job was being stopped
  bool first = phase_ == Phase::running && !hung_ && !s.status->ok() && s.verdict.empty();
  s.first_failure = first;
  try {
    observer_.on_child_exit(
        {s.rank, s.local_rank, s.child.pid(), *s.status, first, s.stopped_by_launcher});
  } catch (const std::exception& e) {
    spdlog::warn("launch: reporting the end of rank {} failed: {}", s.rank, e.what());
  }
  if (!first) return;
  first_failure_ = index;
  phase_ = Phase::stopping;
  auto live = live_ranks();
  std::string message = "rank " + std::to_string(s.rank) + " (pid " +
                        std::to_string(s.child.pid()) + ") failed first: " + s.status->describe();
  if (!live.empty())
    message += "; " + ranks_phrase(live) + (live.size() == 1 ? " has " : " have ") +
               seconds(policy_.grace_s) + " to finish, then SIGTERM";
  say(message);
  // What the node's kernel log says near it: a SIGKILL is the OOM killer's,
  // a GPU's that fell off the bus, or someone's; other ends only when it says something.
  say_kernel_note(s.rank, s.child.pid(), 60, !(s.status->signaled && s.status->value == SIGKILL));
  term_at_ = Deadline::after_seconds(policy_.grace_s);
  // The survivors' NCCL RAS, while they still live (at most --grace, or 1 s).
  if (!live.empty())
    failure_ras_ = ask_ras("after rank " + std::to_string(s.rank) + " failed first",
                           std::min(policy_.ras.timeout_s, std::max(1.0, policy_.grace_s)));
}

void Supervisor::on_signal(int sig) {
  if (sig == SIGUSR1) {
    // One report at a time: a second request while stacks are being taken is that report.
    if (!taking_stacks_ && !live_ranks().empty()) report_stacks("SIGUSR1");
    return;
  }
  if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP) return;  // SIGCHLD only wakes the loop
  auto live = live_ranks();
  if (live.empty()) return;  // the job is over; only its output is still draining
  ++stop_signals_;
  if (stop_signals_ == 1) {
    interrupted_by_ = sig;
    phase_ = Phase::stopping;
    term_at_.reset();
    say("got " + signal_name(sig) + "; forwarding it to " + ranks_phrase(live) + " (" +
        signal_name(sig) + " again kills them at once)");
    signal_live(sig);
    last_request_ = signal_name(sig);
    kill_at_ = Deadline::after_seconds(policy_.kill_after_s);
    return;
  }
  say("got " + signal_name(sig) + " again; sending SIGKILL to " + ranks_phrase(live));
  signal_live(SIGKILL);
  kill_at_.reset();
  give_up_at_ = Deadline::after(kGiveUpAfterKill);
}

void Supervisor::stop_for(const std::string& why) {
  stopped_for_ = true;
  phase_ = Phase::stopping;
  auto line = why.starts_with("launch: ") ? why.substr(8) : why;
  std::string remedy;
  if (auto at = line.find("; try: "); at != std::string::npos)
    remedy = line.substr(at), line.resize(at);
  auto live = live_ranks();
  if (!live.empty()) line += "; stopping " + ranks_phrase(live);
  say(line + remedy);
  signal_live(SIGTERM);
  last_request_ = "SIGTERM";
  kill_at_ = Deadline::after_seconds(policy_.kill_after_s);
}

void Supervisor::act_on_deadlines() {
  if (job_deadline_ && job_deadline_->expired() && phase_ == Phase::running) {
    report_stacks("--timeout " + seconds(timeout_given()));
    timed_out_ = true;
    phase_ = Phase::stopping;
    say("job still running after --timeout " + seconds(timeout_given()) +
        "; sending SIGTERM to " + ranks_phrase(live_ranks()));
    signal_live(SIGTERM);
    last_request_ = "SIGTERM";
    kill_at_ = Deadline::after_seconds(policy_.kill_after_s);
  }
  if (hang_stop_at_ && hang_stop_at_->expired()) stop_hung();
  if (phase_ != Phase::running) job_deadline_.reset();
  if (term_at_ && term_at_->expired()) {
    term_at_.reset();
    if (auto live = live_ranks(); !live.empty()) {
      say(ranks_phrase(live) + " still running " + seconds(policy_.grace_s) + " after rank " +
          std::to_string(slots_[*first_failure_].rank) + " failed; sending SIGTERM");
      signal_live(SIGTERM);
      last_request_ = "SIGTERM";
      kill_at_ = Deadline::after_seconds(policy_.kill_after_s);
    }
  }
  if (kill_at_ && kill_at_->expired()) {
    kill_at_.reset();
    if (auto live = live_ranks(); !live.empty()) {
      say(ranks_phrase(live) + " still running " + seconds(policy_.kill_after_s) + " after " +
          last_request_ + "; sending SIGKILL");
      signal_live(SIGKILL);
      give_up_at_ = Deadline::after(kGiveUpAfterKill);
    }
  }
  if (give_up_at_ && give_up_at_->expired()) {
    give_up_at_.reset();
    if (auto live = live_ranks(); !live.empty()) {
      say(ranks_phrase(live) + " did not exit 5 s after SIGKILL (stuck in the kernel?); " +
          "leaving them to init");
      gave_up_ = true;
    }
  }
}

void Supervisor::watch_exits() {
  for (auto& s : slots_) {
    if (s.status || s.hung_on_exit) continue;
    if (!s.exit_by && s.out.saw_status())
      s.exit_by = Deadline::after_seconds(policy_.exit_timeout_s);
    if (s.exit_by && s.exit_by->expired()) {
      s.hung_on_exit = true;
      exit_timed_out_ = true;
      say("rank " + std::to_string(s.rank) + " (pid " + std::to_string(s.child.pid()) +
          ") printed its status but did not exit within --exit-timeout " +
          seconds(policy_.exit_timeout_s) +
          " (a hang in teardown: CUDA, NCCL or MPI finalize?); sending SIGKILL");
      s.send(SIGKILL);
    }
  }
}

void Supervisor::poll_once() {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  std::vector<Relay*> relays{nullptr};
  for (auto& s : slots_)
    for (Relay* r : {&s.out, &s.err})
      if (r->open()) fds.push_back({r->fd(), POLLIN, 0}), relays.push_back(r);

  auto next = Deadline::after(std::chrono::milliseconds(kPollCapMs));
  for (const auto& d :
       {job_deadline_, term_at_, kill_at_, give_up_at_, drain_until_, hang_stop_at_})
    if (d) next = next.min(*d);
  for (const auto& s : slots_)
    if (s.exit_by && !s.status) next = next.min(*s.exit_by);

  int ready = ::poll(fds.data(), fds.size(), next.poll_ms(kPollCapMs));
  if (ready < 0 && errno != EINTR)
    throw Error(ExitCode::internal, std::string("launch: poll(): ") + std::strerror(errno));
  if (ready <= 0) return;
  if (fds[0].revents) {
    for (int sig : signals_.drain()) on_signal(sig);
  }
  for (std::size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents) {
      relays[i]->pump();
      progress_.output();
    }
}

void Supervisor::signal_live(int sig) {
  for (auto& s : slots_) {
    if (s.status) continue;
    s.send(sig);
    s.stopped_by_launcher = true;
  }
}

std::vector<int> Supervisor::live_ranks() const {
  std::vector<int> live;
  for (const auto& s : slots_)
    if (!s.status) live.push_back(s.rank);
  return live;
}

std::vector<LocalRank> Supervisor::local_ranks() const {
  std::vector<LocalRank> out;
  for (const auto& s : slots_) out.push_back({s.child.pid(), s.rank, s.local_rank});
  return out;
}

bool Supervisor::all_ended() const {
  return std::all_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.status; });
}

bool Supervisor::any_output_open() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const Slot& s) { return s.out.open() || s.err.open(); });
}

std::string Supervisor::summary_note(int status) const {
  std::vector<std::string> parts;
  if (interrupted_by_) parts.push_back("interrupted by " + signal_name(interrupted_by_));
  if (timed_out_) parts.push_back("stopped by --timeout " + seconds(timeout_given()));
  if (hung_) parts.push_back("stopped by --hang-timeout " + seconds(policy_.hang_timeout_s));
  if (stopped_for_) parts.push_back("stopped at the rendezvous");
  if (exit_timed_out_)
    parts.push_back("killed at --exit-timeout " + seconds(policy_.exit_timeout_s));
  if (status != 0) parts.push_back("exit status " + std::to_string(status));
  std::string note;
  for (const auto& p : parts) note += (note.empty() ? "" : "; ") + p;
  return note;
}

void Supervisor::say_kernel_note(int rank, pid_t pid, double before_s, bool quiet_ok) {
  hw::KernelNoteWindow w;
  w.at_usec = hw::usec_since_boot();
  w.job_start_usec = started_usec_;
  w.before_s = before_s;
  w.pid = pid;
  const auto note = hw::kernel_note(w);
  observer_.on_kernel_quote({rank < 0 ? "hang" : "failure", rank, policy_.host, note.lines, note.error});
  if (const auto text = hw::kernel_note_text(note, policy_.host, quiet_ok); !text.empty()) say(text);
}

void Supervisor::say(const std::string& message) {
  err_.write("gpudiag launch: " + message + "\n");
}

}  // namespace gpudiag::launch
