// One round of the launchers' rendezvous: see round_meeting.h. Every decision
// is an ADD (arrival numbers, who closes) or derived alike by every launcher
// from the same published views (disagreements, who is left out, node ranks).
#include "launch/round_meeting.h"

#include <algorithm>
#include <chrono>

#include "util/deadline.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

constexpr auto kRoundPoll = std::chrono::milliseconds(100);
constexpr auto kRoundCall = std::chrono::seconds(5);
/// Arrivals read beyond MAX: enough to see who came late, bounded.
constexpr std::int64_t kRoundExtraViews = 64;
constexpr std::size_t kFaultTextMax = 400;

std::string round_nodes_text(const NodeView& v) {
  return v.min_nodes == v.max_nodes
             ? std::to_string(v.max_nodes)
             : std::to_string(v.min_nodes) + ":" + std::to_string(v.max_nodes);
}

std::string round_hosts(const std::vector<NodeView>& views) {
  std::string out;
  for (const auto& v : views) out += (out.empty() ? "" : ", ") + v.who();
  return out.empty() ? "none" : out;
}

/// A count written by a peer: a number in [0, 2^40], else 0.
std::int64_t round_count(const std::optional<std::string>& text) {
  if (!text || text->empty() || text->size() > 12) return 0;
  std::int64_t n = 0;
  for (char c : *text) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return std::min<std::int64_t>(n, std::int64_t{1} << 40);
}

}  // namespace

std::vector<bool> leave_out(std::size_t views, const std::vector<std::size_t>& faulty,
                            int min_nodes) {
  std::vector<bool> out(views, false);
  std::size_t remaining = views;
  for (auto i : faulty) {
    if (i >= views || out[i]) continue;
    if (static_cast<std::int64_t>(remaining) - 1 < min_nodes) break;
    out[i] = true;
    --remaining;
  }
  return out;
}

RoundOutcome meet_round(Store& store, const NodeView& mine, const std::string& fault,
                        RendezvousTimes times, const std::string& where, const std::string& prefix,
                        const std::function<bool()>& give_up) {
  auto call = [] { return Deadline::after(kRoundCall); };
  const std::string arrivals_key = prefix + "arrivals", size_key = prefix + "size",
                    close_key = prefix + "close";
  auto view_key = [&](std::int64_t a) { return prefix + "node/" + std::to_string(a); };
  auto fault_key = [&](std::int64_t a) { return prefix + "fault/" + std::to_string(a); };

  RoundOutcome out;
  const auto arrival = store.add(arrivals_key, 1, call());
  NodeView me = mine;
  me.faulty = !fault.empty();
  if (me.faulty) store.set(fault_key(arrival), clean_text(fault.substr(0, kFaultTextMax)), call());
  store.set(view_key(arrival), encode_view(me), call());

  const auto join_by = Deadline::after_seconds(times.join_timeout_s);
  std::optional<Deadline> last_call;
  std::vector<NodeView> views;
  std::vector<std::int64_t> arrival_of;  // views[i] arrived as arrival_of[i]
  std::int64_t joined = 0, size = 0;
  WaitNotice notice(
      [&] {
        return "the other nodes at the rendezvous at " + where + ": " + std::to_string(joined) +
               " of " + round_nodes_text(mine) + " joined";
      },
      join_by);
  for (;;) {
    notice.poll();
    const auto arrivals =
        std::clamp<std::int64_t>(store.add(arrivals_key, 0, call()), 0,
                                 mine.max_nodes + kRoundExtraViews);
    joined = arrivals;
    std::vector<std::string> keys{size_key};
    for (std::int64_t a = 1; a <= arrivals; ++a) keys.push_back(view_key(a));
    auto values = store.multi_get(keys, call());
    views.clear();
    arrival_of.clear();
    for (std::size_t i = 1; i < values.size(); ++i) {
      if (!values[i]) break;  // arrived, view not yet written: keep arrival order whole
      if (auto v = decode_view(*values[i])) {
        views.push_back(*v);
        arrival_of.push_back(static_cast<std::int64_t>(i));
      }
    }
    if (auto why = disagreement(views)) throw UsageError(*why);
    if (give_up && give_up()) {  // after the views: a disagreement is said first
      out.gave_up = true;
      return out;
    }
    size = std::min<std::int64_t>(round_count(values[0]), mine.max_nodes);
    if (size > 0) {
      if (arrival > size) {
        out.late = true;
        out.late_why =
            "closed with " + std::to_string(size) + " node(s) (" +
            round_hosts({views.begin(),
                         views.begin() + std::min<std::ptrdiff_t>(
                                             size, static_cast<std::ptrdiff_t>(views.size()))}) +
            ") before this node joined";
        return out;
      }
      if (static_cast<std::int64_t>(views.size()) >= size) {
        views.resize(static_cast<std::size_t>(size));
        arrival_of.resize(static_cast<std::size_t>(size));
        break;
      }
    } else if (arrival > mine.max_nodes) {
      out.late = true;
      out.late_why = "already has --nnodes " + round_nodes_text(mine) +
                     " nodes: " + round_hosts(views);
      return out;
    } else {
      const auto healthy = std::count_if(views.begin(), views.end(),
                                         [](const NodeView& v) { return !v.faulty; });
      bool close = arrivals >= mine.max_nodes;
      if (healthy >= mine.min_nodes) {
        if (!last_call) last_call = Deadline::after_seconds(times.last_call_s);
        close = close || last_call->expired();
      } else if (join_by.expired()) {
        if (arrivals < mine.min_nodes)
          throw TimeoutError(
              "launch: only " + std::to_string(arrivals) + " of " +
                  std::to_string(mine.min_nodes) + " nodes joined the rendezvous at " + where +
                  " within " + std::to_string(static_cast<int>(times.join_timeout_s)) +
                  " s: " + round_hosts(views),
              "start the other nodes with the same --rdzv-endpoint, or lower --nnodes");
        close = true;  // MIN came, some at fault: go on with them
      }
      if (close && store.add(close_key, 1, call()) == 1)
        store.set(size_key, std::to_string(std::min<std::int64_t>(arrivals, mine.max_nodes)),
                  call());
    }
    store.wait({size_key}, Deadline::after(kRoundPoll));
  }

  // Closed: who is left out, derived alike by everyone from the same views.
  std::vector<std::size_t> faulty;
  std::vector<std::string> fault_keys;
  for (std::size_t i = 0; i < views.size(); ++i)
    if (views[i].faulty) {
      faulty.push_back(i);
      fault_keys.push_back(fault_key(arrival_of[i]));
    }
  std::vector<std::optional<std::string>> reasons;
  if (!fault_keys.empty()) reasons = store.multi_get(fault_keys, call());
  const auto out_of_round = leave_out(views.size(), faulty, views.front().min_nodes);
  std::vector<NodeView> admitted;
  std::int64_t my_index = -1;
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (arrival_of[i] == arrival && !out_of_round[i])
      my_index = static_cast<std::int64_t>(admitted.size());
    if (!out_of_round[i]) admitted.push_back(views[i]);
  }
  for (std::size_t k = 0; k < faulty.size(); ++k) {
    std::string why = reasons[k] ? clean_text(reasons[k]->substr(0, kFaultTextMax))
                                 : std::string("at fault in the attempt before");
    (out_of_round[faulty[k]] ? out.left_out : out.kept).push_back({views[faulty[k]], why});
  }
  out.nodes = admitted;
  out.nnodes = static_cast<int>(admitted.size());
  if (my_index >= 0) {
    auto ranks = assign_node_ranks(admitted);
    out.admitted = true;
    out.node_rank = ranks[static_cast<std::size_t>(my_index)];
  }
  return out;
}

}  // namespace gpudiag::launch
