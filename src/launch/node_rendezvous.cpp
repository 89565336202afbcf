// The launchers' rendezvous: see node_rendezvous.h for the protocol. The
// store has no compare-and-set, so every decision is either an ADD (arrival
// numbers, who closes the round) or derived alike by every launcher from the
// same published views (disagreements, node ranks), which needs no agreement
// protocol beyond the store itself.
#include "launch/node_rendezvous.h"
#include "launch/round_meeting.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>

#include "util/deadline.h"
#include "util/error.h"
#include "util/progress.h"

namespace gpudiag::launch {

namespace {

constexpr const char* kAcks = "rdzv/acks";
constexpr auto kPollWait = std::chrono::milliseconds(100);
constexpr auto kCall = std::chrono::seconds(5);

std::string nodes_text(const NodeView& v) {
  return v.min_nodes == v.max_nodes
             ? std::to_string(v.max_nodes)
             : std::to_string(v.min_nodes) + ":" + std::to_string(v.max_nodes);
}

std::int64_t parse_count(const std::optional<std::string>& text) {
  if (!text) return 0;
  try {
    return std::stoll(*text);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::string NodeView::who() const { return host + " (launcher pid " + std::to_string(pid) + ")"; }

std::string encode_view(const NodeView& v) {
  return "gpudiag-node/1 " + v.host + " " + std::to_string(v.pid) + " " + std::to_string(v.nproc) +
         " " + std::to_string(v.min_nodes) + " " + std::to_string(v.max_nodes) + " " +
         std::to_string(v.node_rank) + (v.serves ? " serves" : "") + (v.faulty ? " fault" : "");
}

std::optional<NodeView> decode_view(const std::string& text) {
  std::istringstream in(text);
  std::string tag;
  NodeView v;
  if (!(in >> tag >> v.host >> v.pid >> v.nproc >> v.min_nodes >> v.max_nodes >> v.node_rank) ||
      tag != "gpudiag-node/1" || v.nproc < 1 || v.min_nodes < 1 || v.max_nodes < v.min_nodes)
    return std::nullopt;
  if (v.host.empty() || v.host.size() > 255) return std::nullopt;
  std::string rest;
  if (in >> rest && rest == "serves") {
    v.serves = true;
    if (!(in >> rest)) return v;
  }
  if (!rest.empty() && rest == "fault") {
    v.faulty = true;
    rest.clear();
    if (!(in >> rest)) return v;
  }
  if (!rest.empty()) return std::nullopt;
  return v;
}

std::optional<std::string> disagreement(const std::vector<NodeView>& views) {
  if (views.empty()) return std::nullopt;
  const auto& a = views.front();
  for (std::size_t i = 1; i < views.size(); ++i) {
    const auto& b = views[i];
    std::string flag, va, vb;
    if (b.nproc != a.nproc)
      flag = "--nproc-per-node", va = std::to_string(a.nproc), vb = std::to_string(b.nproc);
    else if (b.min_nodes != a.min_nodes || b.max_nodes != a.max_nodes)
      flag = "--nnodes", va = nodes_text(a), vb = nodes_text(b);
    else
      continue;
    return "launch: the nodes disagree on " + flag + ": " + va + " on " + a.who() + ", " + vb +
           " on " + b.who() + "; try: give every node the same " + flag;
  }
  return std::nullopt;
}

std::vector<int> assign_node_ranks(const std::vector<NodeView>& views) {
  const int n = static_cast<int>(views.size());
  std::vector<int> ranks(views.size(), -1);
  std::vector<int> holder(views.size(), -1);  // by rank: the view that claimed it
  for (int i = 0; i < n; ++i) {
    int r = views[static_cast<std::size_t>(i)].node_rank;
    if (r < 0) continue;
    if (r >= n)
      throw UsageError("launch: --node-rank " + std::to_string(r) + " on " +
                           views[static_cast<std::size_t>(i)].who() + ", but the rendezvous has " +
                           std::to_string(n) + " nodes",
                       "number the nodes 0 to " + std::to_string(n - 1) +
                           ", or leave --node-rank out to have ranks assigned");
    if (holder[static_cast<std::size_t>(r)] >= 0)
      throw UsageError(
          "launch: two nodes claim --node-rank " + std::to_string(r) + ": " +
              views[static_cast<std::size_t>(holder[static_cast<std::size_t>(r)])].who() + " and " +
              views[static_cast<std::size_t>(i)].who(),
          "give each node its own --node-rank, or leave it out everywhere");
    holder[static_cast<std::size_t>(r)] = i;
    ranks[static_cast<std::size_t>(i)] = r;
  }
  // The launcher serving the rendezvous takes node 0 when nobody claimed it:
  // rank 0 (a check's report, a sweep's table and files) lands on the
  // endpoint's node, named in advance, not on whichever node came first.
  if (holder[0] < 0)
    for (int i = 0; i < n; ++i)
      if (views[static_cast<std::size_t>(i)].serves && ranks[static_cast<std::size_t>(i)] < 0) {
        holder[0] = i;
        ranks[static_cast<std::size_t>(i)] = 0;
        break;
      }
  int next = 0;
  for (auto& r : ranks) {
    if (r >= 0) continue;
    while (holder[static_cast<std::size_t>(next)] >= 0) ++next;
    holder[static_cast<std::size_t>(next)] = 0;
    r = next;
  }
  return ranks;
}

Membership meet_nodes(Store& store, const NodeView& mine, RendezvousTimes times,
                      const std::string& where) {
  struct Ack {  // every verdict, good or bad, is acknowledged once
    Store& store;
    ~Ack() {
      try {
        store.add(kAcks, 1, Deadline::after(std::chrono::seconds(2)));
      } catch (const std::exception&) {
      }
    }
  } ack{store};
  auto round = meet_round(store, mine, "", times, where, "rdzv/");
  if (round.late)
    throw UsageError("launch: the rendezvous at " + where + " " + round.late_why,
                     "start every node within --rdzv-conf last_call_timeout of the first " +
                         std::to_string(mine.min_nodes) + ", or raise --nnodes MAX");
  return {round.node_rank, round.nnodes, round.nodes};
}

std::optional<std::string> watch_hand_numbered(Store& store, const NodeView& mine, int nnodes,
                                               bool serving, const std::function<bool()>& stop) {
  auto call = [] { return Deadline::after(kCall); };
  const auto me = std::to_string(mine.node_rank);
  store.set("rdzv/hand/" + me, encode_view(mine), call());
  std::optional<std::string> verdict;
  if (store.add("rdzv/hand-claim/" + me, 1, call()) > 1)
    verdict = "launch: two nodes were started with --node-rank " + me + " (one is " + mine.who() +
              "); try: give each node its own --node-rank, or leave it out and use "
              "--rdzv-endpoint to have ranks assigned";
  std::vector<std::string> keys;
  for (int r = 0; r < nnodes; ++r) keys.push_back("rdzv/hand/" + std::to_string(r));
  keys.push_back("rdzv/hand-claim/" + me);  // a later node given the same rank
  std::size_t seen = 0;
  while (!verdict && !stop()) {
    auto values = store.multi_get(keys, call());
    if (parse_count(values.back()) > 1) {
      verdict = "launch: two nodes were started with --node-rank " + me + " (one is " + mine.who() +
                "); try: give each node its own --node-rank";
      break;
    }
    values.pop_back();
    std::vector<NodeView> views;
    for (const auto& v : values)
      if (v)
        if (auto view = decode_view(*v)) views.push_back(*view);
    seen = views.size();
    verdict = disagreement(views);
    if (!verdict && views.size() == keys.size()) return std::nullopt;  // all here, all agree
    if (!verdict) store.wait({"rdzv/hand-never"}, Deadline::after(kPollWait));
  }
  if (!verdict) return std::nullopt;
  store.add("rdzv/hand-acks", 1, call());
  const auto until = Deadline::after(std::chrono::seconds(3));
  while (serving && !until.expired() &&
         store.add("rdzv/hand-acks", 0, call()) < static_cast<std::int64_t>(seen))
    store.wait({"rdzv/hand-never"}, Deadline::after(std::chrono::milliseconds(50)));
  return verdict;
}

void wait_for_acks(Store& store, double seconds, const std::string& prefix) {
  const auto until = Deadline::after_seconds(seconds);
  try {
    while (!until.expired()) {
      auto arrivals = store.add(prefix + "arrivals", 0, until);
      if (store.add(prefix + "acks", 0, until) >= arrivals) return;
      store.wait({"rdzv/never"}, Deadline::after(std::chrono::milliseconds(50)).min(until));
    }
  } catch (const std::exception&) {
  }
}

}  // namespace gpudiag::launch
