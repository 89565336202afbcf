// `gpudiag launch --json FILE|-`: the job's summary as a document (schema
// gpudiag-launch/1, docs/json.md). A JobRecorder is the LaunchObserver the
// launcher is given: it passes every event on to the store host (first, so a
// death is published as early as before) and notes the times, the pids and
// how each rank ended; document() turns that and the launcher's exit status
// into the summary, the same words as the launcher's last line, and what the
// launcher decided after each attempt (restarted, or not and why).
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <memory>
#include <optional>

#include "launch/observer.h"
#include "launch/rounds.h"

namespace gpudiag::cli {

/// The rounds of a rendezvous as this launcher saw them (launch/rounds.h):
/// [{"round", "nnodes", "node_rank" (null: not admitted), "late",
///   "excluded": [{"host", "pid", "why"}], "kept_at_fault": [...]}].
nlohmann::json rounds_json(const std::vector<launch::RoundRecord>& rounds);

class JobRecorder : public launch::LaunchObserver {
 public:
  /// `inner` (may be null) hears every event first.
  explicit JobRecorder(launch::LaunchObserver* inner) : inner_(inner) {}

  void on_job_start(launch::JobInfo& job) override;
  void on_child_exit(const launch::ChildExit& exit) override;
  void on_attempt_end(const launch::AttemptEnd& end) override { attempts_.push_back(end); }
  void on_stragglers(const nlohmann::json& report) override { stragglers_ = report; }
  void on_kernel_quote(const launch::KernelQuote& quote) override;

  /// The job as the last attempt started it (its token: the ranks' GPUDIAG_TOKEN).
  const launch::JobInfo& job() const { return job_; }
  /// What the launcher decided after each attempt, in order.
  const std::vector<launch::AttemptEnd>& attempts() const { return attempts_; }

  /// The summary once the launch returned `exit_status`.
  nlohmann::json document(const std::vector<std::string>& command, int exit_status) const;

 private:
  struct End {
    launch::ChildExit exit;
    double seconds = 0;  ///< from the job's start
    int times = 0;       ///< how many times this rank ended (restarts)
  };
  launch::LaunchObserver* inner_;
  launch::JobInfo job_;
  bool started_ = false;
  std::chrono::system_clock::time_point wall_start_;
  std::chrono::steady_clock::time_point start_;
  std::map<int, End> ends_;  ///< by global rank
  std::vector<launch::AttemptEnd> attempts_;
  nlohmann::json stragglers_;  ///< the last attempt's (null: not asked)
  nlohmann::json kernel_quotes_ = nlohmann::json::array();  ///< at most kMaxKernelQuotes
  static constexpr std::size_t kMaxKernelQuotes = 16;
};

/// One attempt's observer when the launcher makes one per attempt (restarts):
/// the attempt's own (the store host; may be null) hears every event first,
/// then the recorder that spans the attempts; stop reasons are the first's.
class RecordingObserver : public launch::LaunchObserver {
 public:
  RecordingObserver(std::unique_ptr<launch::LaunchObserver> inner, JobRecorder& recorder)
      : inner_(std::move(inner)), recorder_(recorder) {}
  void on_job_start(launch::JobInfo& job) override {
    if (inner_) inner_->on_job_start(job);
    recorder_.on_job_start(job);
  }
  void on_child_exit(const launch::ChildExit& exit) override {
    if (inner_) inner_->on_child_exit(exit);
    recorder_.on_child_exit(exit);
  }
  std::optional<std::string> stop_reason() override {
    return inner_ ? inner_->stop_reason() : std::nullopt;
  }
  int request_stacks() override { return inner_ ? inner_->request_stacks() : 0; }
  bool answers_stacks() override { return inner_ && inner_->answers_stacks(); }
  int stack_request_pending() override { return inner_ ? inner_->stack_request_pending() : 0; }
  void publish_stacks(int n, const std::string& summary) override {
    if (inner_) inner_->publish_stacks(n, summary);
  }
  std::vector<std::string> collect_stacks(int n, Deadline deadline,
                                          std::vector<int>& silent) override {
    return inner_ ? inner_->collect_stacks(n, deadline, silent) : std::vector<std::string>{};
  }
  std::optional<std::string> final_stop_reason() override {
    return inner_ ? inner_->final_stop_reason() : std::nullopt;
  }
  Store* shared_store() override { return inner_ ? inner_->shared_store() : nullptr; }
  void on_attempt_end(const launch::AttemptEnd& end) override {
    if (inner_) inner_->on_attempt_end(end);
    recorder_.on_attempt_end(end);
  }
  void on_stragglers(const nlohmann::json& report) override { recorder_.on_stragglers(report); }
  void on_kernel_quote(const launch::KernelQuote& quote) override {
    if (inner_) inner_->on_kernel_quote(quote);
    recorder_.on_kernel_quote(quote);
  }

 private:
  std::unique_ptr<launch::LaunchObserver> inner_;
  JobRecorder& recorder_;
};

}  // namespace gpudiag::cli
