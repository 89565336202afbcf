// One round of the sweep (sweep_run.h): this rank measures its pair and
// reports, the judge (rank 0, or the tree's judges folding the pairs) reviews
// the round and plans the next, every rank reads the plan; a progress line a
// round.
#include "sweep/sweep_run.h"

namespace gpudiag::sweep::sweep_run {

void SweepRun::one_round() {
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
  auto g1 =
      plane_.gather_all("sweep-" + k + "-peers", peer.dump(), Deadline::after_seconds(o_.timeout_s),
                        live(), partner >= 0 ? std::vector<int>{partner} : std::vector<int>{});
  mark_gone(g1.missing);
  // The pair's waits have deadlines; NCCL's abort, a communicator's
  // teardown or a cudaFree on a hung GPU have none: the watchdog ends the
  // rank after twice the pair's limit (the test hook fires inside it).
  watchdog_.arm("pool-round " + k, Deadline::after_seconds(2 * o_.pair_timeout_s + 10),
                "the pair's NCCL or CUDA calls did not return (an abort or a teardown that "
                "hangs, a hung GPU?): check nvidia-smi and dmesg on " +
                    me_.host);
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
  json rec{{"k", round_.index},
           {"p", partner},
           {"ok", result.ok},
           {"gbps", result.gbps},
           {"why", result.why.substr(0, kMaxField)}};
  last_peers_ = g1;
  auto review = [&](const Gathered& g) { return judge_round(g, g1.missing); };
  auto g2 = plane_.gather_all("sweep-" + k, rec.dump(),
                              Deadline::after_seconds(o_.pair_timeout_s + o_.timeout_s), live(), {},
                              review);
  mark_gone(g2.missing);
  if (!tree_) {
    read_review(g2.judged, g2.review, g2.aborted, false);
    return;
  }
  if (judge()) plan_ = g2.judged ? judge_round(g2, g1.missing) : "";
  receive_plan(false);
}

std::string SweepRun::judge_round(const Gathered& g, const std::vector<int>& missing_before) {
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
    spdlog::warn(
        "sweep: no results of round {} reached rank 0 through the node leaders: its "
        "pairs count as unreported",
        round_.index);
  }
  if (folded.cut())
    spdlog::warn(
        "sweep: {} pair result(s) of round {} did not fit in the tree's summaries "
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
  return json{{"round", encode_round(next)},
              {"skip", skip},
              {"excluded", next.kind == RoundKind::done ? count_excluded() : -1}}
      .dump();
}

/// The judge's line per round on stderr: a sweep of minutes is not silent.
void SweepRun::progress_line(const std::vector<PairResult>& results, double now,
                             const Round& next) {
  const auto failed =
      std::count_if(results.begin(), results.end(), [](const PairResult& r) { return !r.ok; });
  std::string line = "sweep: round " + std::to_string(round_.index) + " (" + round_.stage() +
                     "): " + std::to_string(results.size()) + " pair(s) in " +
                     human_seconds(out_.rounds.back().seconds);
  if (failed) line += ", " + std::to_string(failed) + " failed";
  line += next.kind == RoundKind::done
              ? "; judged after " + human_seconds(now)
              : "; next: round " + std::to_string(next.index) + " (" + next.stage() + ")";
  write_all(STDERR_FILENO, line + "\n");
}

/// Under node leaders: rank 0 sends its plan (plan_) as its record, which
/// the digest carries to every rank that asks for it (all do); false (and
/// out_.error) when none came.
bool SweepRun::receive_plan(bool first) {
  auto g = plane_.gather_all("sweep-plan-" + std::to_string(++plans_), judge() ? plan_ : "",
                             Deadline::after_seconds(o_.timeout_s), live(), {0});
  mark_gone(g.missing);
  const bool planned = g.judged && g.records[0] && !g.records[0]->empty();
  return read_review(planned, g.records[0].value_or(""), g.aborted, first);
}

/// Applies the judge's review; false (and out_.error) when there is none.
bool SweepRun::read_review(bool judged, const std::string& review,
                           const std::optional<std::string>& aborted, bool first) {
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

}  // namespace gpudiag::sweep::sweep_run
