// The simulator's nodes (see simulator.h, sim_tree.h): a process simulates a
// block of nodes, each with its ranks (real StorePlanes), its store (a
// MemoryStore: the ranks and their leader share this process) and its leader
// (a real Relay, with a real TCP connection to its group's store, and ones to
// the stores above opened only when its group's judge is lost). The checkpoints go
// in steps across the block: every rank publishes, the node processes meet
// (StepBarrier), every leader collects, every leader passes the digest
// down, every rank reads it. The block's last
// rank also keeps the check's own bookkeeping of the others (peer_book.h),
// whose peak size the block reports as a rank's check state.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>

#include "checks/peer_book.h"
#include "checks/record.h"
#include "store/lazy_store.h"
#include "store/memory_store.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "sim/sim_common.h"
#include "sim/sim_traffic.h"
#include "sim/sim_tree.h"
#include "util/error.h"

namespace gpudiag::sim {

namespace {

struct SimNode {
  std::unique_ptr<MemoryStore> store;
  std::unique_ptr<CountingStore> counted;  ///< the leader's view of it, counted
  Uplinks links;
  std::unique_ptr<Relay> leader;
};

}  // namespace

void nodes_process(const Plan& p, const SimOptions& o, const std::string& secret,
                   const Ports& ports, int k0, int k1, int out, StepBarrier& step) {
  const auto& L = p.layout;
  const int n = L.world;
  const int r0 = L.ranks_of_node(k0).first, r1 = L.ranks_of_node(k1 - 1).second + 1;
  std::vector<SimNode> nodes(k1 - k0);
  // Leaders join their parents over TCP; ranks join their node's store.
  parallel_for(k1 - k0, o.threads, [&](int i) {
    const int k = k0 + i;
    auto& node = nodes[i];
    node.store = std::make_unique<MemoryStore>("the store of simnode" + std::to_string(k));
    node.links = uplinks(p, ports, secret, 0, k);
    auto ro = relay_options(p, o, RelayLevel::node, k);
    node.counted = std::make_unique<CountingStore>(*node.store, 0, 1);
    ro.below = node.counted.get();
    node.links.fill(ro);
    node.leader = std::make_unique<Relay>(ro);
  });
  std::vector<std::unique_ptr<Plane>> planes(r1 - r0);
  std::vector<std::string> records(r1 - r0), later(r1 - r0);
  parallel_for(r1 - r0, o.threads, [&](int i) {
    const int r = r0 + i;
    const int k = L.node_of(r);
    StorePlaneIdentity id{r, n, r % L.per_node, "simnode" + std::to_string(k), 100000 + r};
    id.tree = true;
    std::tie(id.node_first, id.node_last) = L.ranks_of_node(k);
    id.judge_grace = ms(3 * (o.timeout_s + 2) + 5);
    id.served_by = "the leader of simnode" + std::to_string(k);
    // The node's store is this process's memory: a view of it per rank, as
    // a rank's own connection would be.
    planes[i] = make_store_plane(std::make_unique<CountingStore>(
                                     std::make_unique<StoreView>(*nodes[k - k0].store), 0, 0),
                                 id, Deadline::after_seconds(60));
    RankRecord rec = sim_record(r, n, o.record_bytes, o.nccl_roots, L.per_node, o.drift_node);
    records[i] = encode(rec);
    // As the check: ids and fingerprints only in exchange records. Made
    // here, not at the checkpoint, where decoding 65,536 records again kept
    // one process past the others' barrier.
    rec.nccl_id.clear();
    rec.fingerprint = {};
    later[i] = encode(rec);
  });

  if (k0 == 0) std::fprintf(stderr, "sim: the first block of %d nodes joined\n", k1 - k0);
  std::vector<std::vector<int>> last(r1 - r0);
  const std::vector<int> absent = p.absent();  // ascending
  CheckResult book;  // the block's last rank's, as the check keeps it
  book.me.rank = r1 - 1;
  book.table.resize(static_cast<std::size_t>(o.ranks));
  book.last_seen.resize(static_cast<std::size_t>(o.ranks));
  book.missed_at.resize(static_cast<std::size_t>(o.ranks));
  book.missing_note.resize(static_cast<std::size_t>(o.ranks));
  std::size_t book_peak = 0;
  std::atomic<int> roots_ok{0}, roots_of{0}, drift_named{0}, drift_of{0};
  std::atomic<std::size_t> most_missing{0};
  std::vector<std::size_t> named_most(kCheckpointCount, 0);  // by checkpoint
  const auto drifting =
      drift_ranks(o, L.nodes(), L.per_node, [&](int r) { return p.arrives(r, 0); });
  const std::string drift = drifting.empty() ? "" : sim_drift_line(o.drift_node, drifting);
  for (int seq = 0; seq < kCheckpointCount; ++seq) {
    const char* name = kTreeCheckpoints[seq];
    if (seq == 1) records.swap(later);
    // The check's NCCL ranks read rank 0's record at the exchange (its id).
    const std::vector<int> need =
        seq == 0 && o.nccl_roots > 0 ? std::vector<int>{0} : std::vector<int>{};
    if (seq == kLastForFaulty + 1) {
      for (int r = r0; r < r1; ++r) {
        if (p.fate[r] != Fate::stop && p.fate[r] != Fate::die) continue;
        planes[r - r0]->note_phase("all-reduce");
        if (p.fate[r] == Fate::die)  // as the node's launcher announces a killed rank
          publish_failure(*nodes[L.node_of(r) - k0].store,
                          "rank " + std::to_string(r) + " [simnode" + std::to_string(L.node_of(r)) +
                              "-" + std::to_string(r % L.per_node) + "] (pid " +
                              std::to_string(100000 + r) + ") was killed by SIGKILL (seen by "
                              "gpudiag-sim)",
                          Deadline::after_seconds(10), FailureKind::died, r);
      }
    }
    // The first block says how long each step took, one line a checkpoint.
    auto tp = std::chrono::steady_clock::now();
    std::string steps;
    auto lap = [&](const char* what) {
      auto now = std::chrono::steady_clock::now();
      char b[64];
      std::snprintf(b, sizeof b, "%s%s %.2f s", steps.empty() ? "" : ", ", what,
                    std::chrono::duration<double>(now - tp).count());
      steps += b;
      tp = now;
    };
    parallel_for(r1 - r0, o.threads, [&](int i) {
      if (p.arrives(r0 + i, seq))
        publish_record(*planes[i], name, records[i], need, Deadline::after_seconds(o.timeout_s));
    });
    lap("ranks publish");
    step.arrive_and_wait(seq);  // the job's nodes reach the checkpoint together
    tp = std::chrono::steady_clock::now();
    auto leading = [&](int i) { return !p.leader_gone(k0 + i, seq); };
    // Leaders that will wait for a rank first: in a job every leader waits
    // at once, so one with a straggler starts its wait with the others, not
    // when a step run in turn reaches it (the judges above would count its
    // late start against it).
    std::vector<int> order(k1 - k0);
    for (int i = 0; i < k1 - k0; ++i) order[i] = i;
    std::stable_partition(order.begin(), order.end(), [&](int i) {
      const auto [a, b] = L.ranks_of_node(k0 + i);
      for (int r = a; r <= b; ++r)
        if (!p.arrives(r, seq)) return true;
      return false;
    });
    parallel_for(k1 - k0, o.threads, [&](int j) {
      const int i = order[j];
      if (leading(i)) nodes[i].leader->collect(seq, Deadline::after_seconds(300));
    });
    lap("leaders collect");
    parallel_for(k1 - k0, o.threads, [&](int i) {
      if (leading(i)) nodes[i].leader->pass_down(seq);
    });
    lap("the digest comes down");
    parallel_for(r1 - r0, o.threads, [&](int i) {
      if (!p.arrives(r0 + i, seq)) return;
      const Gathered g =
          planes[i]->gather_all(name, records[i], Deadline::after_seconds(o.timeout_s), {}, need, {});
      // Only the absent ranks it names: a rank whose digest came late names
      // every other rank, and a block of 25,000 such lists is gigabytes.
      last[i].clear();
      for (std::size_t m = most_missing; g.missing.size() > m;)
        if (most_missing.compare_exchange_weak(m, g.missing.size())) break;
      for (int a : absent)
        if (std::binary_search(g.missing.begin(), g.missing.end(), a)) last[i].push_back(a);
      if (r0 + i == r1 - 1) {
        note_checkpoint(book, g, name);
        book_peak = std::max(book_peak, peer_bytes(book));
      }
      if (seq == 0 && !drift.empty()) {  // its report names the drifting node
        ++drift_of;
        if (sim_names_drift(g, drift, r0 + i)) ++drift_named;
      }
      if (need.empty()) return;
      ++roots_of;
      if (sim_got_root_ids(g, decode(records[i]))) ++roots_ok;
    });
    lap("ranks read the digest");
    named_most[seq] = most_missing.exchange(0);
    if (k0 == 0) {
      auto digest = nodes[0].store->try_get("cp/" + std::to_string(seq) + "/digest",
                                            Deadline::after_seconds(1));
      // Its missing ranges, the start: which ranks a slow run lost, and where.
      std::string ranges;
      if (digest) {
        const auto at = digest->find("\"missing\":["), end = digest->find(",\"missing_count\"");
        if (at != std::string::npos && end != std::string::npos && end > at)
          ranges = ", missing " + digest->substr(at + 10, std::min<std::size_t>(end - at - 10, 160));
      }
      std::fprintf(stderr,
                   "sim: %s: %s (node 0's digest %zu bytes%s; a rank's named at most %zu "
                   "missing)\n",
                   name, steps.c_str(), digest ? digest->size() : 0, ranges.c_str(),
                   named_most[seq]);
    }
    // Every rank here read this checkpoint's digest: a node's store forgets
    // the checkpoint, and the exchange's records go after it. A job's node
    // keeps both in its own memory; 32,768 nodes' worth in four processes is
    // the simulator's, and every page it first touches costs this machine
    // time (docs/BENCHMARKS.md), as much as what it simulates.
    for (auto& node : nodes) node.store->drop_prefix("cp/" + std::to_string(seq) + "/");
    if (seq == 1) std::vector<std::string>().swap(later);
  }

  // Which absent ranks every live rank here named at the last checkpoint.
  std::string named;
  for (int a : absent) {
    bool everywhere = true;
    for (int r = r0; r < r1 && everywhere; ++r)
      if (p.arrives(r, kCheckpointCount - 1))
        everywhere = std::binary_search(last[r - r0].begin(), last[r - r0].end(), a);
    if (everywhere) named += " " + std::to_string(a);
  }
  write_line(out, "named" + named);
  long long rank_bytes = 0, leader_bytes = 0;
  for (const auto& pl : planes) rank_bytes += static_cast<long long>(pl->bytes_moved());
  for (const auto& node : nodes) leader_bytes += static_cast<long long>(node.leader->bytes_up());
  write_line(out, "bytes " + std::to_string(rank_bytes) + " " + std::to_string(leader_bytes));
  write_line(out, "roots " + std::to_string(roots_ok.load()) + " " + std::to_string(roots_of.load()));
  write_line(out, "state " + std::to_string(book_peak));
  write_line(out,
             "drift " + std::to_string(drift_named.load()) + " " + std::to_string(drift_of.load()));
  write_line(out, traffic().line());
  std::string most = "most";
  for (auto m : named_most) most += " " + std::to_string(m);
  write_line(out, most);
  planes.clear();
  write_line(out, std::to_string(peak_rss_kib()));
}

}  // namespace gpudiag::sim
