// The sweep's end (sweep_run.h): the node's hardware read a second time, by
// the rank that read it before the rounds, as check's hardware phase does
// (hw/evidence.h, collect_hw_changes). A physical NIC's carrier_changes, an
// InfiniBand link_downed or link_error_recovery, or a PCIe AER count that
// moved during the sweep, or a link-down line the kernel logged since it
// started, makes the node FAILED with the change quoted in its row ("its
// hardware during the sweep: network link flapped on eth0 (carrier_changes
// 7 -> 9): check the cable"), and excluded. Counters that are high but did
// not move fail nothing, and neither does a virtual interface.
// Each rank's record at the last checkpoint (sweep-end) is its node's line
// ("" when fit); the judge reads them all, and the other ranks read from its
// review how many nodes are to be excluded (under node leaders, from its
// record at one more checkpoint, sweep-excluded).
#include "sweep/sweep_run.h"

namespace gpudiag::sweep::sweep_run {

void SweepRun::finish() {
  hook_.on_phase("hardware");  // GPUDIAG_TEST_RAISE=SIGSTOP@hardware (test_hook.h)
  const auto node = hw::read_node_verdict(
      plane_, hw::node_read_key("sweep-end", me_.host, hw_sources_),
      hw_reader_ ? NodeReader::me : NodeReader::other,
      [&] {
        const auto e = hw::collect_hw_changes(hw_sources_, hw_start_);
        auto v = hw::node_verdict(e, hw_since_);
        v.unfit = hw::unfit_reason(e, hw_since_, true);
        return v;
      },
      Deadline::after_seconds(o_.timeout_s));
  std::string mine = node.verdict.unfit;
  if (mine.size() > kMaxHardwareText) mine = mine.substr(0, kMaxHardwareText - 3) + "...";
  if (!mine.empty() && node.here)
    spdlog::error("{}: its node's hardware during the sweep: {}", rank_label(me_), mine);
  bool reviewed = false;
  auto review = [&](const Gathered& g) {
    fail_by_hardware(g);
    reviewed = true;
    return std::to_string(count_excluded());
  };
  // Under node leaders the review is not run here: rank 0 asks for every
  // record and judges them itself.
  std::vector<int> every;
  if (tree_ && judge()) {
    every.resize(static_cast<std::size_t>(n_));
    std::iota(every.begin(), every.end(), 0);
  }
  auto g = plane_.gather_all("sweep-end", mine, Deadline::after_seconds(o_.timeout_s), live(),
                             every, review);
  if (judge() && planner_) {
    if (!reviewed) fail_by_hardware(g);
    out_.excluded = count_excluded();
  } else {
    int excluded = -1;
    if (g.judged && !g.review.empty()) excluded = read_count(g.review);
    if (excluded >= 0)
      out_.excluded = excluded;
    else if (!mine.empty())  // no review to read (node leaders): this node at least
      out_.excluded = std::max(out_.excluded, 1);
  }
  if (!tree_) return;
  mark_gone(g.missing);  // not waited for again
  // Under node leaders no review came down: rank 0 sends its count as its
  // record, which every rank asks for (as receive_plan does the plan), so a
  // healthy node's ranks end with the status rank 0 ends with.
  auto c = plane_.gather_all("sweep-excluded", judge() && planner_ ? std::to_string(out_.excluded) : "",
                             Deadline::after_seconds(o_.timeout_s), live(), {0});
  if (judge() && planner_) return;
  if (const int n = c.judged && c.records[0] ? read_count(*c.records[0]) : -1; n >= 0)
    out_.excluded = n;
}

/// A count of nodes from rank 0 (a review or a record: untrusted), or -1
/// when it is not a number of nodes this job can have.
int SweepRun::read_count(const std::string& text) const {
  if (text.empty() || text.size() > 9 ||  // fits an int
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  const int n = std::stoi(text);
  return n <= n_ + static_cast<int>(o_.expected_hosts.size()) ? n : -1;
}

void SweepRun::fail_by_hardware(const Gathered& g) {
  if (!planner_) return;
  const Layout& layout = planner_->layout();
  for (int r = 0; r < n_ && r < layout.ranks(); ++r) {
    const auto& rec = g.records.at(r);
    if (!rec || rec->empty() || rec->size() > kMaxHardwareText || !is_clean_text(*rec)) continue;
    // The first of a node's ranks names it; a node already FAILED or gone
    // keeps the reason it had.
    if (const int node = layout.node_of[r]; node >= 0)
      planner_->node_failed(node, "its hardware during the sweep: " + *rec);
  }
  out_.verdicts = planner_->verdicts();
}

}  // namespace gpudiag::sweep::sweep_run
