// The sweep's rank loop (run.h). Records on the wire are small JSON objects,
// read defensively: a peer's record that does not parse, or holds values out
// of range, counts as no report (its pair then failed, or its partner rests),
// never as a crash. The judge's review carries the next round, the nodes that
// no longer take part and, at the end, how many nodes are excluded.
//
// Under node leaders (Plane::judged_by_tree) the tree's judges review, not
// rank 0: rank 0 asks for every record at the exchange only (as a check's
// report does once), gets each round's results folded by the groups
// (tree_results.h, Gathered::judge_share), and sends its plan as its record
// at a third checkpoint a round (sweep-plan-K), which every digest carries.
#include "sweep/run.h"

#include "sweep/sweep_run.h"

namespace gpudiag::sweep {

namespace sweep_run {

SweepOutcome SweepRun::run() {
  plane_.set_patient(true);
  tree_ = plane_.judged_by_tree();
  start_ = Deadline::Clock::now();
  device();
  compute();
  exchange();
  while (out_.error.empty() && round_.kind != RoundKind::done) one_round();
  out_.seconds = seconds_since(start_);
  // What the hardware did during the rounds, at a last checkpoint that every
  // rank reads the verdict of before rank 0 (which may serve the store) goes
  // on to print and exit (hardware_stage.cpp).
  if (out_.error.empty()) finish();
  return std::move(out_);
}

void SweepRun::device() {
  CheckOptions co;
  co.backend = o_.backend;
  co.nccl_lib = o_.nccl_lib;
  choose_backend(co, s_.env, "host/tcp", me_);
  out_.backend = me_.backend;
  out_.nccl_version = me_.nccl_version;
  me_.phase = "device";
  // A call that cannot be given a deadline (cudaMalloc or cudaFree on a
  // hung GPU) ends the rank with its status line, not a silent hang.
  watchdog_.arm("device", Deadline::after_seconds(kDeviceLimitS));
  Disarm disarm{watchdog_};
  try {
    // A node whose kernel log makes it unfit (an Xid 79, an uncorrected
    // memory error, ...) is FAILED with that evidence and its action, and
    // excluded, as a check's ranks are broken by it (hw/evidence.h). One
    // rank of the node reads; the others take its verdict (node_verdict.h).
    hw_sources_ = hw::hw_sources_from_env(s_.env);
    hw_since_ = hw::usec_since_boot();
    const auto node = hw::read_node_verdict(
        plane_, hw::node_read_key("sweep-start", me_.host, hw_sources_), NodeReader::first,
        [&] {
          hw_start_ = hw::collect_hw_evidence(hw_sources_);
          return hw::node_verdict(hw_start_, hw_since_);
        },
        Deadline::after_seconds(o_.timeout_s));
    hw_reader_ = node.here;
    me_.hw_findings = node.verdict.counts;
    if (!node.verdict.unfit.empty()) {
      me_.hardware = node.verdict.unfit;
      throw Error(ExitCode::broken, node.verdict.unfit);
    }
    if (me_.backend == "nccl") {
      if (!me_.backend_why.empty()) throw Error(ExitCode::broken, me_.backend_why);
      auto cuda = probe_cuda();
      auto choice = choose_gpu(me_.local_rank, cuda.device_count, s_.env, o_.device);
      set_device(choice.ordinal);
      auto info = gpu_info(choice.ordinal);
      me_.gpu_ordinal = info.ordinal;
      me_.gpu_name = info.name;
      me_.gpu_bus_id = info.pci_bus_id;
      me_.gpu_uuid = info.uuid;
      test_device_memory(o_.mem_bytes ? o_.mem_bytes : kGpuMem, me_.rank);
      meter_ = make_nccl_pair_meter(o_.nccl_lib);
    } else {
      test_host_memory(o_.mem_bytes ? o_.mem_bytes : kHostMem, me_.rank, me_.host);
      meter_ = make_tcp_pair_meter(advertise_, token_);
    }
    me_.endpoint = meter_->endpoint();
  } catch (const Error& e) {
    me_.fail("device", e.one_line(), e.code() == ExitCode::timeout);
    spdlog::error("{} cannot take part in the sweep: {}", rank_label(me_), e.one_line());
  }
  try {
    me_.fingerprint =
        collect_fingerprint(live_sources(s_.env, me_.host, me_.gpu_ordinal, o_.nccl_lib));
  } catch (const std::exception& e) {
    spdlog::warn("rank {}: no fingerprint: {}", me_.rank, e.what());
  }
  spec_.bytes = o_.bytes ? o_.bytes : me_.backend == "nccl" ? kGpuBytes : kHostBytes;
  spec_.iters = o_.iters;
  spec_.timeout_s = o_.pair_timeout_s;
  out_.bytes = spec_.bytes;
}

void SweepRun::exchange() {
  auto review = [&](const Gathered& g) {
    std::vector<std::optional<RankRecord>> table(n_);
    std::vector<std::optional<std::string>> hosts(n_);
    std::vector<int> unnamable;  // arrived, with a host name a hostlist cannot hold
    std::vector<int> local_size(n_, -1);
    for (int r = 0; r < n_; ++r) {
      auto wrapped = parse(g.records[r]);
      if (!wrapped || !wrapped->contains("rec") || !(*wrapped)["rec"].is_string()) continue;
      const auto ls = wrapped->value("local_size", -1);
      if (ls >= 1 && ls <= 1024) local_size[r] = ls;
      try {
        table[r] = decode((*wrapped)["rec"].get<std::string>());
        if (table[r]->rank != r) continue;
        if (hostlist_ok(table[r]->host))
          hosts[r] = table[r]->host;
        else
          unnamable.push_back(r);
      } catch (const Error&) {
      }
    }
    Layout layout = make_layout(hosts);
    out_.ranks_per_node.clear();
    for (const auto& m : layout.members) out_.ranks_per_node.push_back(static_cast<int>(m.size()));
    const bool gpu = me_.backend == "nccl";
    planner_.emplace(layout, planner_options(gpu, o_.time_budget_s));
    std::set<std::string> seen(layout.hosts.begin(), layout.hosts.end());
    std::vector<std::string> absent;
    for (const auto& h : o_.expected_hosts)
      if (!seen.count(h)) absent.push_back(h);
    planner_->never_arrived(absent);
    std::vector<int> unknown;
    for (int r = 0; r < n_; ++r)
      if (!hosts[r] && std::find(unnamable.begin(), unnamable.end(), r) == unnamable.end())
        unknown.push_back(r);
    if (!unnamable.empty())
      out_.warnings.push_back("rank(s) " + compress_ranks(unnamable) +
                              " left out: their host names hold a space, comma, bracket or "
                              "control character, which no hostlist can name");
    if (!unknown.empty())
      out_.warnings.push_back("rank(s) " + compress_ranks(unknown) +
                              " never reached the sweep (their hosts are unknown here: pass "
                              "--hosts to name the pool's hosts)");
    json skip = json::array();
    // Hosts the history blames often enough are not tested again: FAILED with why.
    for (const auto& [host, why] : o_.left_out)
      for (int node = 0; node < layout.nodes(); ++node)
        if (layout.hosts[node] == host) {
          planner_->node_failed(node, why);
          skip.push_back(node);
        }
    for (int r = 0; r < n_; ++r)
      if (table[r] && !table[r]->ok && layout.node_of[r] >= 0) {
        const int node = layout.node_of[r];
        planner_->node_failed(node, table[r]->hardware.empty()
                                        ? rank_label(*table[r]) + " failed in " + table[r]->failed_phase +
                                              ": " + table[r]->reason
                                        : "its hardware: " + table[r]->hardware);
        skip.push_back(node);
      }
    // A rank whose GEMMs differ from its model's majority fails its node;
    // a slow rate is a warning only (compute_stage.h).
    const ComputeStage compute = judge_compute_stage(table);
    for (const auto& [r, why] : compute.failed)
      if (layout.node_of[r] >= 0) {
        planner_->node_failed(layout.node_of[r], why);
        skip.push_back(layout.node_of[r]);
      }
    out_.compute_line = compute.line;
    out_.compute_rates_judged = compute.rates_judged;
    out_.compute_slow = static_cast<int>(compute.slow.size());
    for (const auto& w : compute.slow) out_.warnings.push_back(w);
    // A node whose launcher says it has L ranks, of which fewer arrived.
    for (int node = 0; node < layout.nodes(); ++node) {
      int expect = -1;
      std::set<int> locals;
      for (int r : layout.members[node]) {
        expect = std::max(expect, local_size[r]);
        if (table[r]) locals.insert(table[r]->local_rank);
      }
      if (expect <= static_cast<int>(layout.members[node].size())) continue;
      std::vector<int> absent_locals;
      for (int l = 0; l < expect; ++l)
        if (!locals.count(l)) absent_locals.push_back(l);
      planner_->node_failed(node,
                            std::to_string(expect - static_cast<int>(layout.members[node].size())) +
                                " of its " + std::to_string(expect) +
                                " ranks never reached the sweep (local rank(s) " +
                                compress_ranks(absent_locals) + ")");
      skip.push_back(node);
    }
    const auto checkpoint = review_table(table, table, g.missing, true);
    out_.fingerprint = checkpoint.fingerprint;
    for (const auto& c : checkpoint.conflicts) out_.warnings.push_back(c);
    for (const auto& w : checkpoint.warnings) out_.warnings.push_back(w);
    for (const auto& t : table)
      if (t && out_.gpu_name.empty()) out_.gpu_name = t->gpu_name;
    const Round first = planner_->next(seconds_since(start_));
    round_start_ = seconds_since(start_);
    return json{{"layout", encode_layout(layout)},
                {"round", encode_round(first)},
                {"skip", skip},
                {"excluded", first.kind == RoundKind::done ? count_excluded() : -1},
                {"report_host", me_.host}}
        .dump();
  };
  const json mine{{"rec", encode(me_)}, {"local_size", s_.world.local_size}};
  // Under node leaders rank 0 asks for every record, once, and reviews here.
  std::vector<int> every;
  if (tree_ && judge()) {
    every.resize(static_cast<std::size_t>(n_));
    std::iota(every.begin(), every.end(), 0);
  }
  auto g = plane_.gather_all("sweep-exchange", mine.dump(), Deadline::after_seconds(o_.timeout_s),
                             {}, every, review);
  mark_gone(g.missing);
  me_.fingerprint = {};
  if (tree_) {
    if (judge() && g.judged) plan_ = review(g);
    if (!receive_plan(true)) return;
  } else if (!read_review(g.judged, g.review, g.aborted, true)) {
    return;
  }
  if (judge()) {
    out_.layout = planner_->layout();
    out_.hosts = planner_->hosts();
    out_.tests = planner_->tests();
    out_.test_nodes = planner_->test_nodes();
    if (round_.kind == RoundKind::done) out_.verdicts = planner_->verdicts();
  }
}

std::vector<int> SweepRun::live() const {
  std::vector<int> v;
  for (int r = 0; r < n_; ++r)
    if (!gone_[r]) v.push_back(r);
  return v;
}

int SweepRun::my_partner() const {
  if (!me_.ok) return -1;
  const int p = partner_in(round_, layout_, me_.rank);
  if (p < 0 || gone_[p]) return -1;
  const int mine = layout_.node_of[me_.rank], theirs = layout_.node_of[p];
  if (mine < 0 || theirs < 0 || skip_[mine] || skip_[theirs]) return -1;
  return p;
}

bool SweepRun::hostlist_ok(const std::string& h) {
  if (h.empty() || h.size() > 255) return false;
  for (unsigned char c : h)
    if (c <= ' ' || c == ',' || c == '[' || c == ']' || c == 0x7f) return false;
  return true;
}

}  // namespace sweep_run

using sweep_run::SweepRun;

SweepOutcome run_sweep(const SweepOptions& options, CheckSetup& setup,
                       const std::string& advertise_host, const std::string& token) {
  return SweepRun(options, setup, advertise_host, token).run();
}

std::vector<std::string> excluded_hosts(const SweepOutcome& o) {
  std::vector<std::string> out;
  for (const auto& v : o.verdicts)
    if (v.state != NodeState::ok && v.node >= 0 && v.node < static_cast<int>(o.hosts.size()))
      out.push_back(o.hosts[v.node]);
  return out;
}

}  // namespace gpudiag::sweep
