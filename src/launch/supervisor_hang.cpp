// When a job hangs (supervisor.h): --hang-timeout's watch of progress, the
// verdict (no progress, and some rank waits for another: wait_frames.h) and
// the stop that follows, and where every rank is: each live rank's stack taken at
// once on a thread of its own while the loop goes on reaping, the other
// nodes' stacks asked for and grouped, and NCCL's RAS asked alongside.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launch/stacks.h"
#include "launch/supervisor_detail.h"
#include "launch/wait_frames.h"
#include "store/socket.h"
#include "util/fd_write.h"
#include "util/file_out.h"

namespace gpudiag::launch {

using supervisor_detail::kStacksFromNodes;
using supervisor_detail::ranks_phrase;
using supervisor_detail::seconds;

void Supervisor::watch_progress() {
  if (policy_.hang_timeout_s <= 0 || hang_reported_ || phase_ != Phase::running) return;
  std::vector<ProgressWatch::Rank> live;
  for (const auto& s : slots_)
    if (!s.status) live.push_back({s.child.pid(), s.progress_file});
  if (!progress_.hung(live)) return;
  // Nothing progressed for the limit. A hang only when some rank waits for
  // another (wait_frames.h): a long import, load, compile or sleep of every
  // rank is left alone, said once.
  const std::string quiet = "no progress for " + seconds(policy_.hang_timeout_s) +
                            ", but no rank waits for another";
  if (policy_.world_size == 1) {
    hang_reported_ = true;  // one rank has no other to wait for: never stopped
    say(quiet + " (a 1-rank job): not stopped");
    return;
  }
  // Seen waiting a moment ago and nothing progressed since: the hang. (A rank
  // that has just entered a barrier its peer reaches next is progress the
  // startup hook writes within half a second; seen at once, it looked hung.)
  const double confirm_s = std::min(2.0, policy_.hang_timeout_s / 2);
  auto stacks = std::move(hang_stacks_);
  hang_stacks_.clear();
  const double since_seen =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - hang_seen_at_).count();
  const bool same_stretch = progress_.idle_s() >= hang_seen_idle_s_ + since_seen - 0.05;
  if (stacks.empty() || !same_stretch) {
    stacks = local_stacks(true);
    if (phase_ != Phase::running || live_ranks().empty()) return;
    if (!some_rank_waits(stacks)) {
      if (!not_stopped_said_) say(quiet + ": not stopped");
      not_stopped_said_ = true;
      progress_.hold_off(policy_.hang_timeout_s / 2);
      return;
    }
    hang_stacks_ = std::move(stacks);
    hang_seen_at_ = std::chrono::steady_clock::now();
    hang_seen_idle_s_ = progress_.idle_s();
    progress_.hold_off(confirm_s);
    return;
  }
  hang_reported_ = true;
  // The job hung: decided now, whenever its ranks are stopped. A rank that
  // ends from here on (another node's launcher stopped its peers first, so
  // its collective failed) is an effect of the stop, not a first failure.
  hung_ = true;
  report_stacks("--hang-timeout " + seconds(policy_.hang_timeout_s) +
                    ": no rank made progress for that long (no output, no collective completed, "
                    "no change of where its code is) and some rank waits for another",
                std::move(stacks));
  // The node's kernel log since the ranks last progressed, and a minute before.
  say_kernel_note(-1, 0, 60 + progress_.idle_s(), false);
  // Another node's launcher keeps its ranks alive until the first node has
  // asked for their stacks (it hangs too, so it asks within seconds).
  if (observer_.answers_stacks()) {
    hang_stop_at_ = Deadline::after(kStacksFromNodes);
    return;
  }
  stop_hung();
}

void Supervisor::stop_hung() {
  hang_stop_at_.reset();
  if (phase_ != Phase::running) return;
  // Stopped as --timeout stops a job (exit status 3), with its own words.
  hung_ = true;  // already set when the hang was reported
  phase_ = Phase::stopping;
  auto live = live_ranks();
  say("the job hung (--hang-timeout " + seconds(policy_.hang_timeout_s) + "); sending SIGTERM to " +
      ranks_phrase(live));
  signal_live(SIGTERM);
  last_request_ = "SIGTERM";
  kill_at_ = Deadline::after_seconds(policy_.kill_after_s);
}

std::vector<RankStack> Supervisor::local_stacks(bool for_verdict) {
  // Every live rank's stack at once, each on a thread of its own (a debugger
  // may take seconds a rank); meanwhile this loop goes on reaping and relaying,
  // so a rank that exits is reaped when it exits and the first failure stays
  // the first (taken one by one, a rank that died meanwhile was reaped after
  // the others, in slot order).
  struct Taking {
    std::size_t slot;
    pid_t pid;
    std::string file;
    RankStack st;
  };
  std::vector<Taking> taking;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (!slots_[i].status) taking.push_back({i, slots_[i].child.pid(), slots_[i].stack_file, {}});
  std::atomic<std::size_t> left{taking.size()};
  std::vector<std::thread> threads;
  taking_stacks_ = true;
  for (auto& t : taking)
    threads.emplace_back([&t, &left, for_verdict] {
      t.st = take_stack(t.pid, t.file);
      // Python frames that name no wait may still sit in a native one
      // (store.wait(), work.wait(), .item() behind a collective).
      if (for_verdict && t.st.source == "python" && python_wait(t.st.frames).kind == WaitKind::none)
        t.st.native = take_stack(t.pid, "").frames;
      --left;
    });
  while (left > 0) {
    reap();
    poll_once();
  }
  for (auto& th : threads) th.join();
  taking_stacks_ = false;
  reap();
  std::vector<RankStack> stacks;
  for (auto& t : taking) {
    auto& s = slots_[t.slot];
    RankStack st = std::move(t.st);
    if (s.status) {  // it ended while its stack was taken: say so, not "ptrace refused"
      st.frames.clear();
      st.native.clear();
      st.error = "it exited while its stack was taken (" + s.status->describe() + ")";
    }
    st.rank = s.rank;
    st.local_rank = s.local_rank;
    st.host = policy_.host;
    st.pid = t.pid;
    if (!s.progress_file.empty()) st.sequence = progress_.sequence(t.pid);
    summarise(st);
    stacks.push_back(std::move(st));
  }
  if (for_verdict) mark_ahead(stacks);
  return stacks;
}

std::string Supervisor::stack_files(const std::vector<RankStack>& stacks) {
  ++stack_reports_;
  if (policy_.stack_dir.empty()) return {};
  const std::string dir = policy_.stack_dir + "/stacks-" + std::to_string(stack_reports_);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& st : stacks) {
    // Never through a link or into a FIFO planted in a shared folder.
    net::Fd fd(open_own_file(dir + "/rank" + std::to_string(st.rank) + ".txt"));
    if (!fd) continue;
    (void)write_all(fd.get(), "# rank " + std::to_string(st.rank) + " pid " +
                                  std::to_string(st.pid) + " (" + st.source + ")\n" + st.text);
  }
  return dir;
}

void Supervisor::report_stacks(const std::string& why, std::vector<RankStack> taken) {
  if (live_ranks().empty()) return;
  // The first node's launcher asks the others first, so all take theirs at once.
  const int request = observer_.request_stacks();
  auto ras = ask_ras(why.substr(0, why.find(':')), policy_.ras.timeout_s);  // alongside the stacks
  auto stacks = taken.empty() ? local_stacks() : std::move(taken);
  const std::string dir = stack_files(stacks);
  cached_summary_ = encode_stacks(stacks);
  std::string nodes_note;
  if (request > 0) {
    std::vector<int> silent;
    for (const auto& text :
         observer_.collect_stacks(request, Deadline::after(kStacksFromNodes), silent))
      for (auto& s : decode_stacks(text)) stacks.push_back(std::move(s));
    std::sort(stacks.begin(), stacks.end(),
              [](const RankStack& a, const RankStack& b) { return a.rank < b.rank; });
    nodes_note = "; every node's ranks";
    if (!silent.empty())
      nodes_note += " but node(s) " + format_ranks(silent) + "'s (no answer within " +
                    seconds(std::chrono::duration<double>(kStacksFromNodes).count()) + ")";
  }
  std::string text = "where the ranks are (" + why + nodes_note + ")" +
                     (dir.empty() ? std::string() : "; full stacks in " + dir) + ":";
  if (hung_) hang_point_ = launch::hang_point(stacks);  // the restart policy's word on it
  for (const auto& line : group_stacks(stacks)) text += "\n  " + line;
  const std::string me = std::to_string(::getpid());
  text += "\n  (kill -USR1 " + me + " asks again; the job goes on)";
  say(text);
  finish_ras(std::move(ras));
}

void Supervisor::answer_stack_request() {
  const int n = observer_.stack_request_pending();
  if (n <= 0) return;
  // Just reported on its own (--hang-timeout): those stacks, taken while
  // the ranks were still untouched.
  if (hang_stop_at_ && !cached_summary_.empty()) {
    observer_.publish_stacks(n, cached_summary_);
    stop_hung();
    return;
  }
  if (live_ranks().empty()) return;
  auto ras = ask_ras("the first node asked where the ranks are", policy_.ras.timeout_s);
  auto stacks = local_stacks();
  stack_files(stacks);
  observer_.publish_stacks(n, encode_stacks(stacks));
  finish_ras(std::move(ras));
}

}  // namespace gpudiag::launch
