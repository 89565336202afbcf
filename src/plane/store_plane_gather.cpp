// A checkpoint on the store plane (store_plane_detail.h): this rank's record,
// the judge's wait, read and digest, a rank's read of the digest and of the
// records it needs, and under node leaders the same through its node's store.
#include "plane/store_plane_detail.h"

namespace gpudiag::store_plane_detail {

Gathered StorePlane::gather_all(const std::string& name, const std::string& mine, Deadline deadline,
                                const std::vector<int>& wait_for, const std::vector<int>& need,
                                const Review& review) {
  const std::string prefix = "cp/" + std::to_string(seq_++) + "/";
  checkpoint_ = name;
  wait_ms_ = std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                        deadline.when() - Deadline::Clock::now())
                                        .count());
  Gathered g;
  g.records.resize(me_.size);
  g.notes.resize(me_.size);
  g.records[me_.rank] = mine;
  if (lost_ || cut_off_) {
    g.aborted = lost_ ? lost_ : cut_off_;
    g.find_missing();
    return g;
  }
  // A store that answers late but whose process runs (answered() lets its
  // timeout through) is busy, not gone: every step here is a SET or a read, so
  // the checkpoint starts again until its deadline (and the judge's grace)
  // rather than calling every rank missing after one slow reply.
  const Deadline retry_until = Deadline::at(deadline.when() + kJudgeGrace);
  for (;;) try {
    // A SET is answered at once: the answer window, not the checkpoint's
    // deadline, so a store that stops now is named within seconds.
    if (!published_) publish_now(prefix, name, mine, need);
    published_ = false;
    if (me_.tree) {
      tree_gather(g, prefix, deadline, need);
    } else if (me_.rank == 0) {
      judge(g, prefix, deadline, wait_for, review);
    } else if (!read_digest(g, prefix, deadline)) {
      // The judge did not publish in time (it is missing, or late): read the
      // table as every rank did before the digest existed.
      spdlog::debug("rank {}: no digest from rank 0 at {}; reading every record", me_.rank, prefix);
      wait_and_read_all(g, prefix, deadline, wait_for);
    } else if (!need.empty()) {
      std::vector<std::string> keys;
      for (int r : need) keys.push_back(prefix + std::to_string(r));
      auto values = multi_get(keys);
      for (std::size_t i = 0; i < need.size(); ++i)
        if (need[i] != me_.rank) g.records[need[i]] = std::move(values[i]);
    }
    break;
  } catch (const Error& e) {
    note_lost(e);
    if (e.code() == ExitCode::timeout && !lost_ && !retry_until.expired()) {
      spdlog::debug("rank {}: the store answered late at {}; again", me_.rank, prefix);
      g = Gathered{};
      g.records.resize(me_.size);
      g.notes.resize(me_.size);
      g.records[me_.rank] = mine;
      continue;
    }
    g.records.assign(me_.size, std::nullopt);
    g.records[me_.rank] = mine;
    g.judged = false;
    g.review.clear();
    g.find_missing();
    // The announced failure, when there is one, is why the store went away.
    g.aborted = failure_ ? failure_ : lost_;
    break;
  }
  return g;
}

void StorePlane::publish(const std::string& name, const std::string& mine,
                         const std::vector<int>& need, Deadline deadline) {
  if (lost_ || published_) return;
  wait_ms_ = std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                        deadline.when() - Deadline::Clock::now())
                                        .count());
  try {
    publish_now("cp/" + std::to_string(seq_) + "/", name, mine, need);
    published_ = true;
  } catch (const Error& e) {
    note_lost(e);
  }
}

/// Sets this rank's record; in a tree, first the checkpoint's name and
/// wait (every rank of the node: its first may be the one that never
/// comes) and the records it needs from other nodes.
void StorePlane::publish_now(const std::string& prefix, const std::string& name,
                             const std::string& mine, const std::vector<int>& need) {
  if (me_.tree) {
    answered([&](Deadline d) { set(prefix + "name", name, d); });
    // How long this checkpoint waits for stragglers, for a leader that
    // does not know the command's --timeout (gpudiag launch).
    answered([&](Deadline d) { set(prefix + "wait", std::to_string(wait_ms_), d); });
    std::string far;
    if (static_cast<int>(need.size()) >= me_.size)
      far = "*";  // every record: the report's table, on rank 0 at the end
    else
      for (int r : need)
        if (r < me_.node_first || r > me_.node_last)
          far += (far.empty() ? "" : ",") + std::to_string(r);
    if (!far.empty())
      answered(
          [&](Deadline d) { set("need/" + prefix.substr(3) + std::to_string(me_.rank), far, d); });
  }
  answered([&](Deadline d) { set(prefix + std::to_string(me_.rank), mine, d); });
}

/// In a tree: the leader's digest, then the records this rank needs from
/// its node's store; without a digest, only this node's records are known
/// and every other rank is unheard of.
void StorePlane::tree_gather(Gathered& g, const std::string& prefix, Deadline deadline,
                             const std::vector<int>& need) {
  if (read_digest(g, prefix, Deadline::at(deadline.when() + me_.judge_grace - kJudgeGrace))) {
    // Rank 0's share from the root: its leader set it before the digest.
    if (me_.rank == 0)
      if (auto share = answered([&](Deadline d) { return store_->try_get(prefix + "judge", d); }))
        g.judge_share = std::move(*share);
    std::vector<int> want;
    for (int r : need)
      if (r != me_.rank && r >= 0 && r < me_.size && !g.records[r]) want.push_back(r);
    if (want.empty()) return;
    // In slices, so a table of 100,000 records stays within a reply's cap.
    constexpr std::size_t kSlice = 2048;
    for (std::size_t at = 0; at < want.size(); at += kSlice) {
      std::vector<std::string> keys;
      for (std::size_t i = at; i < want.size() && i < at + kSlice; ++i)
        keys.push_back(prefix + std::to_string(want[i]));
      auto values = multi_get(keys);
      for (std::size_t i = 0; i < keys.size(); ++i)
        if (!std::binary_search(g.missing.begin(), g.missing.end(), want[at + i]))
          g.records[want[at + i]] = std::move(values[i]);
    }
    return;
  }
  std::vector<std::string> keys;
  for (int r = me_.node_first; r <= me_.node_last; ++r) keys.push_back(prefix + std::to_string(r));
  auto values = multi_get(keys);
  for (int r = me_.node_first; r <= me_.node_last; ++r)
    if (r != me_.rank) g.records[r] = std::move(values[r - me_.node_first]);
  g.find_missing();
  g.aborted = cut_off_ ? *cut_off_
                       : "no digest from this node's leader by the deadline: the judges above it "
                         "did not answer, so only this node's ranks are known";
}

/// Rank 0: waits for the records, reads them all, reviews the table and
/// publishes the digest every other rank reads.
void StorePlane::judge(Gathered& g, const std::string& prefix, Deadline deadline,
                       const std::vector<int>& wait_for, const Review& review) {
  wait_and_read_all(g, prefix, deadline, wait_for);
  g.judged = true;
  if (review) g.review = review(g);
  if (g.review.size() > kMaxDigestReview) g.review.resize(kMaxDigestReview);
  const std::string digest = encode_digest(g);
  answered([&](Deadline d) { set(prefix + "digest", digest, d); });
}

/// Waits for the records of `wait_for` (every rank when empty) until the
/// deadline, a death of every straggler, or a grace after a failure; then
/// reads every record and describes the missing ranks.
void StorePlane::wait_and_read_all(Gathered& g, const std::string& prefix, Deadline deadline,
                                   const std::vector<int>& wait_for) {
  std::vector<std::string> keys, needed;
  for (int r = 0; r < me_.size; ++r) keys.push_back(prefix + std::to_string(r));
  std::vector<int> needed_ranks = wait_for;
  if (needed_ranks.empty())
    for (int r = 0; r < me_.size; ++r) needed_ranks.push_back(r);
  for (int r : needed_ranks) needed.push_back(keys[r]);
  // A failed peer usually still arrives with its record: once a failure is
  // announced, wait only a short grace for the rest, then give up.
  Deadline until = deadline;
  bool all = false;
  // Which records are still missing, said every 10 s on a terminal (progress.h).
  WaitNotice notice(
      [&] {
        std::vector<int> missing;
        try {
          auto v = multi_get(needed);
          for (std::size_t i = 0; i < v.size(); ++i)
            if (!v[i]) missing.push_back(needed_ranks[i]);
        } catch (const std::exception&) {
        }
        return (missing.empty() ? std::string("the other ranks")
                                : "rank(s) " + compress_ranks(missing)) +
               " at the " + checkpoint_ + " checkpoint";
      },
      until);
  while (!(all = store_->wait(needed, until.min(Deadline::after(kSlice))))) {
    notice.poll();
    if (until.expired()) break;
    if (!g.aborted && !patient_)
      if (auto f = peer_failure()) {
        g.aborted = *f;
        until = until.min(Deadline::after(kFailureGrace));
      }
    if (!death_) poll_failures();  // a death may follow the first failure announced
    if (lost_) throw Error(ExitCode::broken, *lost_);  // the store stopped answering
    if (death_ && only_the_dead_are_missing(needed, needed_ranks)) break;
  }
  if (all) g.aborted.reset();
  const std::string mine = *g.records[me_.rank];
  auto values = multi_get(keys);
  for (int r = 0; r < me_.size; ++r) g.records[r] = std::move(values[r]);
  if (!g.records[me_.rank]) g.records[me_.rank] = mine;
  g.find_missing();
  if (!g.complete()) describe_missing(g);
}

/// A rank other than the judge: waits for rank 0's digest a little past its
/// own deadline (rank 0 decides at its deadline); false when it never came,
/// or rank 0 was reported dead.
bool StorePlane::read_digest(Gathered& g, const std::string& prefix, Deadline deadline) {
  const std::string key = prefix + "digest";
  const Deadline until = Deadline::at(deadline.when() + kJudgeGrace);
  WaitNotice notice(
      [&] {
        return std::string(me_.tree ? "the node leader's" : "rank 0's") + " review of the " +
               checkpoint_ + " checkpoint";
      },
      until);
  while (!store_->wait({key}, until.min(Deadline::after(kSlice)))) {
    notice.poll();
    if (until.expired()) return false;
    poll_failures();
    if (lost_) throw Error(ExitCode::broken, *lost_);  // the store stopped answering
    if (me_.tree)  // this node's judge stopped: no digest will come
      if (auto why = answered([&](Deadline d) { return store_->try_get("tree/stopped", d); })) {
        cut_off_ = "this node's leader stopped judging (" + storelimits::store_text(*why, 512) +
                   "), so only this node's ranks are known";
        return false;
      }
    if (!me_.tree && death_ &&
        answered([&](Deadline d) { return store_->try_get(dead_key(0), d); }))
      return false;
  }
  auto text = answered([&](Deadline d) { return store_->try_get(key, d); });
  if (!text) return false;
  bytes_ += key.size() + text->size();
  return decode_digest(*text, me_.rank, me_.size, g);
}

std::vector<std::optional<std::string>> StorePlane::multi_get(
    const std::vector<std::string>& keys) {
  auto values = answered([&](Deadline d) { return store_->multi_get(keys, d); });
  for (std::size_t i = 0; i < keys.size(); ++i)
    bytes_ += keys[i].size() + (values[i] ? values[i]->size() : 0);
  return values;
}

/// Fills notes for the missing ranks from their hello/ and phase/ keys.
void StorePlane::describe_missing(Gathered& g) {
  std::vector<int> missing = g.missing;
  std::vector<std::string> keys;
  for (int r : missing) {
    keys.push_back(key("hello", r));
    keys.push_back(key("phase", r));
  }
  keys.push_back("duplicates");  // the server's own: ranks claimed twice
  auto v = multi_get(keys);
  const auto& twice = v.back();
  for (std::size_t i = 0; i < missing.size(); ++i) {
    const auto& hello = v[2 * i];
    const auto& phase = v[2 * i + 1];
    if (!hello)
      g.notes[missing[i]] = "never joined the store: not started, or cannot reach " +
                            store_->address() +
                            (twice ? "; but " + storelimits::store_text(*twice, 512) +
                                         ": a duplicate RANK takes another rank's place"
                                   : "");
    else
      g.notes[missing[i]] = storelimits::store_text(*hello, 256) +
                            ", last phase: " + storelimits::store_text(phase.value_or("start"), 64);
  }
}

}  // namespace gpudiag::store_plane_detail
