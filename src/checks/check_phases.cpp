// The check's phases' own work (check.cpp runs them): the node's hardware
// evidence (read at the start and again at the end), the device and its
// memory, the compute phase and its verdict, this rank's fingerprint, what the exchange's review says and which
// records a rank needs, the communicator, the verified all-reduce and its
// large-message timing, and bench's sweep.
#include "checks/check_run.h"
#include "compute/known.h"
#include "hw/evidence.h"
#include "hw/node_verdict.h"
#include "world/nvlink_topology.h"

namespace gpudiag::check_run {

void CheckRun::device() {
  // A node whose kernel log shows it unfit (an Xid 79, an uncorrected memory
  // error, ...) fails here, whatever the backend and whether or not the GPU
  // at that address is still visible; a workload Xid never does (hw/evidence.h).
  // Its sysfs and NVML counters are read now and compared at the end
  // (hardware()), by one rank of the node; the others take its verdict.
  hw_sources_ = hw::hw_sources_from_env(setup_.env);
  hw_since_ = hw::usec_since_boot();
  const auto node = hw::read_node_verdict(
      plane_, hw::node_read_key("check-start", me().host, hw_sources_), NodeReader::first,
      [&] {
        hw_start_ = hw::collect_hw_evidence(hw_sources_);
        return hw::node_verdict(hw_start_, hw_since_);
      },
      Deadline::after_seconds(opt_.timeout_s));
  hw_reader_ = node.here;
  judge_hardware(node.verdict);
  if (me().backend == "nccl") {
    // Both missing pieces in one line: a user fixes them in one go.
    if (!me().backend_why.empty()) throw Error(ExitCode::broken, me().backend_why);
    auto cuda = probe_cuda();
    auto choice = choose_gpu(me().local_rank, cuda.device_count, setup_.env, opt_.device);
    set_device(choice.ordinal);
    auto info = gpu_info(choice.ordinal);
    me().gpu_ordinal = info.ordinal;
    me().gpu_name = info.name;
    me().gpu_bus_id = info.pci_bus_id;
    me().gpu_uuid = info.uuid;
    test_device_memory(opt_.mem_bytes ? opt_.mem_bytes : kDefaultDeviceMem, me().rank);
    // One stream for every copy and collective: they are then ordered.
    device_ = std::make_shared<DeviceContext>();
    const CudaOps& ops = cuda_ops();
    const int e =
        ops.memset_async(device_->scratch.get(), 0, sizeof(float), device_->stream.handle());
    if (e != CudaOps::kSuccess)
      throw Error(ExitCode::broken, "cudaMemsetAsync failed: " + cuda_error_text(ops, e));
    wait_stream(ops, device_->stream.handle(), "clearing the barrier's buffer",
                Deadline::after_seconds(opt_.timeout_s));
    workspace_ = make_device_workspace(ops, device_->stream.handle(), device_);
    make_nccl_root_id(me(), load_nccl(opt_.nccl_lib), setup_.env, opt_.nccl_roots);
  } else {
    if (!setup_.host_transport)
      throw Error(ExitCode::usage, "the host backend needs MPI or the rendezvous store here");
    test_host_memory(opt_.mem_bytes ? opt_.mem_bytes : kDefaultHostMem, me().rank, me().host);
    workspace_ = make_host_workspace();
    me().endpoint = setup_.host_transport->prepare();
  }
}

void CheckRun::compute() {
  ComputeOptions o;
  o.gpu = on_gpu();
  o.seconds = compute_seconds();
  o.flip = test_hook_.flips("compute");  // GPUDIAG_TEST_RAISE=FLIP@compute
  o.model = o.gpu ? me().gpu_name : cpu_model();
  o.deadline = Deadline::after_seconds(watchdog_limit_s("compute"));
  me().compute = run_compute(o);
  // As the GEMMs end, while their heat and power still hold the clocks: what
  // a SLOW verdict quotes (world/nvml_clocks.h).
  if (o.gpu) me().compute.clocks = read_gpu_clocks(load_nvml(), me().gpu_bus_id);
  if (me().compute.judged == "unstable") spdlog::warn("rank {}: {}", me().rank, me().compute.finding);
}

void CheckRun::judge_compute_here() {
  auto& c = me().compute;
  if (!c.ran() || c.failed()) return;
  auto j = judge_compute(review_.compute, c);
  c.judged = std::move(j.judged);
  c.finding = std::move(j.finding);
  // Where this rank's model, driver and kernel version have a known entry,
  // it is the reference (compute/known.h); a table out of shape judges nothing.
  const KnownTable& known = known_checksums();
  if (!known.error.empty() && me().rank == 0) spdlog::warn("{}", known.error);
  judge_known(known, review_.compute, c);
}

void CheckRun::settle_compute() {
  auto settle = [](RankRecord& r) {
    if (r.ok && r.compute.failed()) r.fail("compute", r.compute.finding);
  };
  settle(me());
  for (std::size_t r = 0; r < result_.table.size(); ++r) {
    const auto& rec = std::as_const(result_.table).at(r);
    if (rec && rec->ok && rec->compute.failed()) settle(*result_.table[r]);
  }
}

void CheckRun::hardware() {
  // The rank that read the node at the start reads it again; a rank that
  // must read it itself here (its reader gone) compares no counters.
  const auto node = hw::read_node_verdict(
      plane_, hw::node_read_key("check-end", me().host, hw_sources_),
      hw_reader_ ? NodeReader::me : NodeReader::other,
      [&] { return hw::node_verdict(hw::collect_hw_changes(hw_sources_, hw_start_), hw_since_); },
      Deadline::after_seconds(opt_.timeout_s));
  judge_hardware(node.verdict);
}

void CheckRun::judge_hardware(const hw::NodeVerdict& v) {
  me().hw_findings = v.counts;
  for (const auto& why : v.unreadable) spdlog::debug("rank {}: {}", me().rank, why);
  if (!v.unfit.empty()) {
    me().hardware = v.unfit;
    throw Error(ExitCode::broken, v.unfit);
  }
}

/// This rank's fingerprint, for the exchange's comparison. Never fails the
/// rank: what cannot be read is "unknown".
void CheckRun::fingerprint() {
  try {
    me().fingerprint =
        collect_fingerprint(live_sources(setup_.env, me().host, me().gpu_ordinal, opt_.nccl_lib));
    // Kept past the exchange: the bandwidth verdict asks whether the job's
    // nodes share one NVLink domain.
    if (const auto d = me().fingerprint.get("gpu.nvlink_domain"); d.find('/') != std::string::npos)
      me().nvlink_domain = d;
    if (!me().gpu_bus_id.empty()) me().nvlink_peers = read_nvlink_peers(nvlink_api(), me().gpu_bus_id);
  } catch (const std::exception& e) {
    spdlog::warn("rank {}: no fingerprint: {}", me().rank, e.what());
  }
}

/// This checkpoint's records, decoded (nullopt for the missing and the
/// records this rank did not read).
std::vector<std::optional<RankRecord>> CheckRun::decoded(const Gathered& g) {
  std::vector<std::optional<RankRecord>> out(g.records.size());
  for (std::size_t r = 0; r < g.records.size(); ++r)
    if (const auto& rec = g.records.at(r)) out[r] = decode(*rec);
  return out;
}

/// The judge's review; this rank's own when there was no judge (then the
/// plane read every record).
CheckpointReview CheckRun::read_review(const Gathered& g, bool exchange) {
  if (g.judged) try {
      return decode_review(g.review);
    } catch (const std::exception& e) {
      spdlog::warn(
          "rank {}: rank 0's review of the checkpoint does not parse ({}); "
          "judging from the records read",
          me().rank, e.what());
    }
  return review_table(decoded(g), table_lookup(), g.missing, exchange);
}

/// The table as it was, for the labels of ranks now missing.
std::function<const RankRecord*(int)> CheckRun::table_lookup() const {
  return [this](int r) -> const RankRecord* {
    if (r < 0 || r >= static_cast<int>(result_.table.size())) return nullptr;
    const auto& rec = result_.table.at(r);
    return rec ? &*rec : nullptr;
  };
}

/// "rank 3 [node2-1]" from what this rank knows, or the judge's label.
std::string CheckRun::label_of(int r) const {
  if (const auto& rec = result_.table.at(r)) return rank_label(*rec);
  for (const auto& [rank, label] : review_.labels)
    if (rank == r) return label;
  return rank_label(r, std::nullopt);
}

/// The records this rank reads at the exchange besides the digest: rank 0's
/// (its NCCL id; other roots' come in the review), its host/tcp ring
/// neighbours and halving partners, or every rank's for the link test's mesh.
std::vector<int> CheckRun::exchange_needs() const {
  const int n = plane_.size(), r = result_.me.rank;
  std::vector<int> need;
  if (result_.me.backend == "nccl") return {0};
  if (result_.me.backend != "host/tcp") return {};
  if (opt_.link_bytes > 0 || (opt_.bench && opt_.bench->coll == Coll::alltoall)) {
    for (int p = 0; p < n; ++p) need.push_back(p);
    return need;
  }
  need = {(r + 1) % n, (r + n - 1) % n};
  if (n >= 4 && (n & (n - 1)) == 0)
    for (int k = 0; (1 << k) < n; ++k) need.push_back(r ^ (1 << k));
  return need;
}

void CheckRun::communicator() {
  auto abort_check = [this] { return plane_.peer_failure(); };
  if (me().backend == "nccl") {
    NcclContext ctx;
    ctx.nccl = load_nccl(opt_.nccl_lib).api;
    ctx.cuda = &cuda_ops();
    ctx.stream = device_->stream.handle();
    ctx.scratch = static_cast<float*>(device_->scratch.get());
    ctx.owner = device_;
    comm_ = make_nccl_communicator(ctx, nccl_init_ids(me(), result_.table.at(0), review_.nccl_ids),
                                   me().rank, plane_.size(), wait_deadline(), abort_check);
  } else {
    // Only the records exchange_needs() asked for are known here; the
    // transport never reads the others.
    std::vector<RankRecord> peers;
    const int n = plane_.size(), r = me().rank;
    for (int i = 0; i < n; ++i) {
      if (const auto& rec = result_.table.at(i)) {
        peers.push_back(*rec);
        continue;
      }
      // A TCP ring neighbour's record must be here: the digest promised it
      // (exchange_needs; MPI's collectives need no endpoints).
      if (me().backend == "host/tcp" && n > 1 && (i == (r + 1) % n || i == (r + n - 1) % n))
        throw Error(ExitCode::broken,
                    "the record of rank " + std::to_string(i) +
                        ", this rank's ring neighbour, did not arrive with the checkpoint's "
                        "digest (short, or forged by a process that is not the judge)",
                    "run the job with GPUDIAG_SECRET (or under gpudiag launch) so only its own "
                    "processes write the store");
      RankRecord unknown;
      unknown.rank = i;
      unknown.endpoint = "not-read:0";
      peers.push_back(unknown);
    }
    // A peer that dies while the ring connects is announced: stop waiting then.
    comm_ = setup_.host_transport->connect(peers, me().rank, wait_deadline(), abort_check);
    comm_->set_abort_check(abort_check);
  }
}

void CheckRun::all_reduce() {
  const CollectiveChecks checks{*comm_, *workspace_, me().rank, plane_.size(), wait_seconds()};
  checks.all_reduce(opt_.small_bytes);
  float* large = checks.all_reduce(opt_.large_bytes);
  time_large(large, opt_.large_bytes / sizeof(float));
  checks.all_gather_and_broadcast(opt_.small_bytes);
}

void CheckRun::time_large(float* buf, std::size_t n) {
  // With the link test, --iters is the pairs' count; one timed all-reduce will do here.
  const int iters = opt_.link_bytes > 0 ? std::min(opt_.iters, 1) : opt_.iters;
  if (iters <= 0) return;
  // Each iteration timed by the backend: NCCL between two CUDA events on
  // the device, the host backends on the host's clock.
  double seconds = 0;
  for (int i = 0; i < iters; ++i) {
    test_hook_.on_iteration("all-reduce", i + 1);
    seconds += comm_->all_reduce_timed(buf, n, 1, wait_deadline());
  }
  me().allreduce_bytes = static_cast<double>(n * sizeof(float));
  me().allreduce_seconds = seconds / iters;
}

/// gpudiag bench's measurement (bench/engine.h). Peers start each size
/// together (the engine's barrier), so a slow rank shows in everyone's times.
void CheckRun::sweep() {
  if (opt_.bench->coll == Coll::alltoall) comm_->open_links(wait_deadline());
  BenchContext ctx{*comm_, *workspace_, me().rank, plane_.size(), wait_seconds(), nullptr};
  if (me().rank == 0 && opt_.bench_start) ctx.sink = opt_.bench_start(result_.table);
  run_bench(*opt_.bench, ctx);
}

}  // namespace gpudiag::check_run
