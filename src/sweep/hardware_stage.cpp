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
// review how many nodes are to be excluded.
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
    return;
  }
  int excluded = -1;
  if (g.judged && !g.review.empty() && g.review.size() <= 9 &&  // fits an int
      std::all_of(g.review.begin(), g.review.end(), [](char c) { return c >= '0' && c <= '9'; }))
    excluded = std::stoi(g.review);
  if (excluded >= 0 && excluded <= n_ + static_cast<int>(o_.expected_hosts.size()))
    out_.excluded = excluded;
  else if (!mine.empty())  // no review to read (node leaders): this node at least
    out_.excluded = std::max(out_.excluded, 1);
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
