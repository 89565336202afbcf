// JobRecorder (launch_json.h). Ranks are listed by global rank; a rank that
// never ended (given up on after SIGKILL) has "exit": null. "summary" is
// launch::job_summary() over the same outcomes, so the document and the
// launcher's last line count the same ranks as OK.
#include "cli/launch_json.h"

#include <ctime>

#include "launch/summary.h"
#include "util/text.h"

namespace gpudiag::cli {

namespace {

std::string iso_utc(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json exit_json(const launch::ExitStatus& s) {
  return {{"code", s.signaled ? nlohmann::json() : nlohmann::json(s.value)},
          {"signal", s.signaled ? nlohmann::json(launch::signal_name(s.value)) : nlohmann::json()},
          {"shell_status", s.shell_status()},
          {"describe", s.describe()}};
}

}  // namespace

nlohmann::json rounds_json(const std::vector<launch::RoundRecord>& rounds) {
  auto faulty = [](const std::vector<launch::FaultyNode>& nodes) {
    auto out = nlohmann::json::array();
    for (const auto& f : nodes)
      out.push_back({{"host", f.node.host}, {"pid", f.node.pid}, {"why", f.why}});
    return out;
  };
  auto out = nlohmann::json::array();
  for (const auto& r : rounds)
    out.push_back({{"round", r.round},
                   {"nnodes", r.nnodes},
                   {"node_rank", r.node_rank >= 0 ? nlohmann::json(r.node_rank) : nlohmann::json()},
                   {"late", r.late},
                   {"excluded", faulty(r.left_out)},
                   {"kept_at_fault", faulty(r.kept)},
                   {"preflight_fault",
                    r.preflight.empty() ? nlohmann::json() : nlohmann::json(r.preflight)}});
  return out;
}

namespace {

/// What the launcher decided after each attempt (launch/restart_policy.h).
nlohmann::json attempts_json(const std::vector<launch::AttemptEnd>& attempts) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : attempts) {
    nlohmann::json error = nullptr;
    if (a.error)
      error = {{"rank", a.error->rank},
               {"message", a.error->message},
               {"file", a.error->file},
               {"line", a.error->line},
               {"hang", a.error->hang}};
    out.push_back({{"attempt", a.attempt},
                   {"exit_status", a.exit_status},
                   {"error", error},
                   {"node_fault", a.node_fault.empty() ? nlohmann::json() : nlohmann::json(a.node_fault)},
                   {"then", launch::after_attempt_name(a.then)}});
  }
  return out;
}

}  // namespace

void JobRecorder::on_job_start(launch::JobInfo& job) {
  if (inner_) inner_->on_job_start(job);
  job_ = job;
  started_ = true;
  wall_start_ = std::chrono::system_clock::now();
  start_ = std::chrono::steady_clock::now();
}

void JobRecorder::on_child_exit(const launch::ChildExit& exit) {
  if (inner_) inner_->on_child_exit(exit);
  auto& end = ends_[exit.rank];
  end.exit = exit;
  end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  ++end.times;
}

void JobRecorder::on_kernel_quote(const launch::KernelQuote& quote) {
  if (inner_) inner_->on_kernel_quote(quote);
  if (kernel_quotes_.size() >= kMaxKernelQuotes) return;
  // The lines come from the kernel log: clean text only, or the writer throws.
  nlohmann::json lines = nlohmann::json::array();
  for (const auto& l : quote.lines) lines.push_back(clean_text(l));
  kernel_quotes_.push_back(
      {{"attempt", static_cast<int>(attempts_.size())},
       {"at", quote.at},
       {"rank", quote.rank >= 0 ? nlohmann::json(quote.rank) : nlohmann::json()},
       {"host", clean_text(quote.host)},
       {"lines", std::move(lines)},
       {"error", quote.error.empty() ? nlohmann::json() : nlohmann::json(clean_text(quote.error))}});
}

nlohmann::json JobRecorder::document(const std::vector<std::string>& command,
                                     int exit_status) const {
  const double seconds =
      started_ ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()
               : 0.0;
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json first = nullptr;
  std::vector<launch::RankOutcome> outcomes;
  int ok = 0;
  for (int local = 0; local < job_.nproc_per_node; ++local) {
    const int rank = job_.rank_of(local);
    nlohmann::json r = {{"rank", rank}, {"local_rank", local}};
    launch::RankOutcome outcome;
    outcome.rank = rank;
    if (auto it = ends_.find(rank); it != ends_.end()) {
      const auto& e = it->second;
      r["pid"] = e.exit.pid;
      r["exit"] = exit_json(e.exit.status);
      r["ok"] = e.exit.status.ok();
      r["seconds"] = e.seconds;
      r["first_failure"] = e.exit.first_failure;
      r["stopped_by_launcher"] = e.exit.stopped_by_launcher;
      if (e.times > 1) r["ended_times"] = e.times;
      ok += e.exit.status.ok() ? 1 : 0;
      outcome.status = e.exit.status;
      outcome.first_failure = e.exit.first_failure;
      outcome.stopped_by_launcher = e.exit.stopped_by_launcher;
      outcome.killed_by_launcher = e.exit.stopped_by_launcher && e.exit.status.signaled;
      if (e.exit.first_failure)
        first = {{"rank", rank}, {"pid", e.exit.pid}, {"exit", exit_json(e.exit.status)}};
    } else {
      r["exit"] = nullptr;  // never ended: left behind after SIGKILL
      r["ok"] = false;
    }
    outcomes.push_back(outcome);
    ranks.push_back(std::move(r));
  }
  const launch::AttemptEnd* last = attempts_.empty() ? nullptr : &attempts_.back();
  nlohmann::json doc = {{"command", command},
          {"nnodes", job_.nnodes},
          {"node_rank", job_.node_rank},
          {"nproc_per_node", job_.nproc_per_node},
          {"world_size", job_.world_size()},
          {"master", job_.master_addr + ":" + std::to_string(job_.master_port)},
          {"started_at", started_ ? iso_utc(wall_start_) : ""},
          {"seconds", seconds},
          {"exit_status", exit_status},
          {"ok", exit_status == 0},
          {"ranks_ok", ok},
          {"first_failure", first},
          {"summary", launch::job_summary(outcomes, "")},
          {"ranks", std::move(ranks)},
          {"restart_policy", last ? nlohmann::json(last->policy) : nlohmann::json()},
          {"attempts", attempts_json(attempts_)},
          {"restarts_stopped",
           last && !last->line.empty() ? nlohmann::json(last->line) : nlohmann::json()}};
  doc["kernel_log"] = kernel_quotes_;
  if (!stragglers_.is_null()) doc["stragglers"] = stragglers_;  // --stragglers only
  return doc;
}

}  // namespace gpudiag::cli
