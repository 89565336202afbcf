// The launcher's one loop: relay output, reap children, react to signals
// and deadlines, until every child of this node is gone.
//
// Each pass reaps whatever ended (never blocking), acts on any deadline that
// passed, then poll()s the signal pipe and every open output pipe with a
// timeout no later than the next deadline. What stops the job:
//   - the first child that fails while the job runs: it is reported, the
//     others get `grace` seconds to finish (e.g. to print their own view of
//     the failure), then SIGTERM, then SIGKILL `kill_after` seconds later;
//   - SIGINT, SIGTERM or SIGHUP to the launcher: forwarded at once to every
//     child; SIGKILL `kill_after` seconds later, or at once at a second one;
//   - `timeout` seconds of wall clock: SIGTERM, then SIGKILL as above;
//   - a rank that printed its status line but has not exited `exit_timeout`
//     seconds later (a CUDA/NCCL/MPI teardown hang): reported, then SIGKILL.
// A child that survives SIGKILL for 5 s is reported and left to init, so the
// launcher itself always ends. After the last child, output still in the
// pipes is drained for at most 2 s. The exit status comes from how every
// child ended (job_status.h), not from which one failed first; the loop only
// records what it did itself: the signals it sent each child, an interrupt,
// a deadline.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launch/child.h"
#include "launch/observer.h"
#include "launch/stacks.h"
#include "launch/output.h"
#include "launch/progress_watch.h"
#include "launch/ras_note.h"
#include "launch/signal_pipe.h"
#include "launch/summary.h"
#include "util/deadline.h"

namespace gpudiag::launch {

struct StopPolicy {
  double grace_s = 5.0;
  double kill_after_s = 3.0;
  /// What is left of the job's --timeout for this attempt (0: no limit).
  double timeout_s = 0.0;
  /// After a rank printed its status line (OK or broken), the seconds it has
  /// to exit before it is reported as hung in teardown and killed.
  double exit_timeout_s = 120.0;
  /// Nothing progressed for this long (progress_watch.h) while some rank
  /// waits for another (wait_frames.h): report every rank's stack and stop
  /// the job (0: never).
  double hang_timeout_s = 0.0;
  /// Where the full stacks go (stacks-<n>/rank<R>.txt); "" none.
  std::string stack_dir;
  /// The host name in "[host-local]" labels.
  std::string host;
  /// Whether and where to ask the ranks' NCCL RAS with each stack report and after the
  /// first failure (supervisor_ras.cpp).
  RasPlan ras;
  /// Ranks in the whole job (every node); 1: --hang-timeout never stops it (0: unknown).
  int world_size = 0;
  /// The --timeout as the user gave it, for what the launcher says (0: as timeout_s):
  /// a restart's attempt has only what is left of it, and even the first attempt
  /// starts a few microseconds into it (it said "--timeout 0.999999 s").
  double timeout_given_s = 0.0;
};

/// A started child and the rank it runs.
struct RankProcess {
  int rank = 0;
  int local_rank = 0;
  ChildProcess child;
  /// --log-dir files for its stdout and stderr (null: none), and whether each
  /// stream still goes to the launcher's own stdout/stderr.
  std::shared_ptr<LogFile> out_log, err_log;
  bool out_console = true, err_console = true;
  /// Its stdout goes out without the "[rankN]: " prefix: rank 0 of a bench,
  /// whose report the field's nccl-tests parsers read line by line.
  bool bare_stdout = false;
  /// A Python rank's faulthandler dump file (GPUDIAG_STACK_FILE; "" none).
  std::string stack_file;
  /// Its startup hook's progress file (GPUDIAG_PROGRESS_FILE; "" none).
  std::string progress_file;
  /// Where a gpudiag subcommand leaves its verdict (verdict_file.h; "" none).
  std::string verdict_file;
};

class Supervisor {
 public:
  /// `signals` must have existed before the children were spawned, so no
  /// SIGINT or SIGCHLD in between is lost. `prefix`: "[rankN]: " on lines.
  Supervisor(std::vector<RankProcess> ranks, bool prefix, StopPolicy policy,
             LaunchObserver& observer, SignalPipe& signals);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Supervises until every child has ended (or is given up on); prints the
  /// one-line summary; returns the launcher's exit status (job_status.h).
  int run();
  /// After run(): the job ended because a rank failed or --hang-timeout
  /// stopped it (not a signal to the launcher, --timeout, --exit-timeout or a
  /// rank that would not die), so a restart may help. `failure()` then says
  /// which rank and how, or that the job hung.
  bool restartable() const;
  std::string failure() const;
  /// After a --hang-timeout stop: where it stood (restart_policy.h's
  /// hang_point()), nullopt when not hung or not told.
  const std::optional<AttemptError>& hang_point() const { return hang_point_; }
  /// After run(): the local rank of the first child that failed, -1 none.
  int first_failed_local_rank() const;
  /// How the first failing rank ended (nullopt when none failed).
  std::optional<ExitStatus> first_failure_status() const;
  /// Its pid (0 when none failed).
  pid_t first_failed_pid() const;
  /// How each local rank ended (index = local rank).
  std::vector<RankOutcome> outcomes() const;

 private:
  struct Slot;
  enum class Phase { running, stopping };

  void reap();
  void on_exit(std::size_t index);
  void on_signal(int sig);
  void act_on_deadlines();
  /// The observer gave a reason to stop (stop_reason()): say it, SIGTERM all.
  void stop_for(const std::string& why);
  void watch_exits();
  void poll_once();
  void signal_live(int sig);
  std::vector<int> live_ranks() const;
  bool all_ended() const;
  bool any_output_open() const;
  std::string summary_note(int status) const;
  void say(const std::string& message);
  /// Takes every live rank's stack (or uses `taken`, this node's, just
  /// taken), prints the grouping (the whole job's on the first node of
  /// several), writes the files.
  void report_stacks(const std::string& why, std::vector<RankStack> taken = {});
  /// This node's live ranks' stacks, summarised; `for_verdict`: also the
  /// native frames of Python ranks whose Python frames name no wait, and the
  /// ranks ahead in the default group marked (wait_frames.h).
  std::vector<RankStack> local_stacks(bool for_verdict = false);
  /// Writes them under a new stacks-N of the stack folder; that folder ("" none).
  std::string stack_files(const std::vector<RankStack>& stacks);
  bool taking_stacks_ = false;  ///< local_stacks() runs: its poll may not start another
  /// Another node's launcher asked for this node's stacks: answer it.
  void answer_stack_request();
  /// Stops a job --hang-timeout found hung (exit status 3).
  void stop_hung();
  /// --hang-timeout: nothing progressed for the limit and some rank waits
  /// for another? Then the report and the stop; else one line, once.
  void watch_progress();
  /// NCCL RAS (supervisor_ras.cpp): a question asked on its own thread (null when the
  /// plan says not to ask); its answer said once it came, the loop relaying meanwhile;
  /// the question asked after the first failure, said when it comes.
  std::unique_ptr<RasProbe> ask_ras(const std::string& why, double deadline_s);
  void finish_ras(std::unique_ptr<RasProbe> probe);
  void watch_ras();
  std::vector<LocalRank> local_ranks() const;
  double timeout_given() const {
    return policy_.timeout_given_s > 0 ? policy_.timeout_given_s : policy_.timeout_s;
  }
  std::unique_ptr<RasProbe> failure_ras_;

  Sink out_{1};
  Sink err_{2};
  std::vector<Slot> slots_;
  StopPolicy policy_;
  LaunchObserver& observer_;
  SignalPipe& signals_;

  Phase phase_ = Phase::running;
  std::optional<std::size_t> first_failure_;
  int interrupted_by_ = 0;
  bool hang_reported_ = false;
  bool not_stopped_said_ = false;  ///< "... but no rank waits for another: not stopped"
  /// Some rank was seen waiting for another after the limit: these stacks,
  /// and how long nothing had progressed then; the stop comes once a moment
  /// more passed without progress (the wait was not a step just begun).
  std::vector<RankStack> hang_stacks_;
  std::chrono::steady_clock::time_point hang_seen_at_;
  double hang_seen_idle_s_ = 0.0;
  ProgressWatch progress_;
  bool hung_ = false;  ///< stopped by --hang-timeout
  std::optional<AttemptError> hang_point_;  ///< where it hung (hang_point())
  std::optional<Deadline> hang_stop_at_;  ///< a later node's stop, after node 0 asked
  std::string cached_summary_;           ///< this node's last report, encoded
  int stack_reports_ = 0;
  int stop_signals_ = 0;
  bool timed_out_ = false;
  /// A rank was killed for hanging past --exit-timeout.
  bool exit_timed_out_ = false;
  bool gave_up_ = false;
  /// Stopped at the observer's word; the exit status is then 2.
  bool stopped_for_ = false;
  /// The signal the next SIGKILL message says the ranks ignored.
  std::string last_request_;
  std::optional<Deadline> job_deadline_, term_at_, kill_at_, give_up_at_, drain_until_;
  /// When supervision began, in the kernel log's clock: the failure and hang
  /// reports quote no kernel line from before it (hw/kernel_note.h).
  std::uint64_t started_usec_ = 0;
  /// The node's kernel log near a failure now: a rank killed next to an Xid
  /// or an OOM kill says which. `rank`, `pid`: the rank that died (-1, 0 for
  /// a hang); `quiet_ok`: say nothing when the log shows nothing. The
  /// observer hears the quote (launch --json's kernel_log).
  void say_kernel_note(int rank, pid_t pid, double before_s, bool quiet_ok);
};

}  // namespace gpudiag::launch
