// The tree's choice and a leader's stores and judges (see tree_host.h). The
// judges review with the reviewer the host is given (TreeConnect::reviewer:
// the caller's, so this room reaches neither the check nor the sweep).
#include "tree/tree_host.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <stdexcept>

#include "store/lazy_store.h"
#include "tree/relay.h"
#include "store/store_limits.h"
#include "store/tcp_store_client.h"
#include "util/error.h"

namespace gpudiag {

namespace {

/// How long a leader tries a group judge's published store before taking it
/// for gone: the judge listened before it published, so only a dead (or
/// unreachable) judge refuses or drops every attempt this long.
constexpr double kGroupConnectS = 5.0;
// Refused connections to a judge's published address are retried this long.
constexpr auto kRefusedIsGone = std::chrono::milliseconds(500);

/// A judge's children get the check's timeout and a second per level below it.
RelayOptions options(const TreePlan& p, RelayLevel level, int index, double timeout_s) {
  return relay_options(p.layout, level, index,
                       std::chrono::milliseconds(static_cast<long>(timeout_s * 1000)),
                       kSlackPerLevel);
}

/// A relay's run: until its children said goodbye, or the host stops it.
/// Between checkpoints the ranks work (the memory test, the timed
/// collectives): a judge waits for the next one as long as the host lives.
void run_relay(Relay& r, const std::atomic<bool>& stop) {
  r.run(std::chrono::hours(24), [&] { return stop.load(); });
}

}  // namespace

bool mpi_tree_wanted(const World& w, const TreeSettings& t) {
  return t.mode == TreeSettings::Mode::on ||
         (t.mode == TreeSettings::Mode::automatic && w.size >= kAutoTreeRanks);
}

int tree_group_nodes(const TreeSettings& t) {
  return t.group_nodes > 0 ? t.group_nodes : TreeLayout{}.group_nodes;
}

std::optional<TreePlan> plan_tree(const World& w, const TreeSettings& t, int master_port) {
  const bool on = t.mode == TreeSettings::Mode::on;
  if (!on && !mpi_tree_wanted(w, t)) return std::nullopt;
  const int per = w.local_size;
  // Every node the same size, in blocks: each rank decides alone, so the
  // layout must be one every rank computes the same way.
  if (per <= 0 || w.local_rank >= per || w.rank % per != w.local_rank || w.size % per != 0) {
    if (on && w.rank == 0)
      spdlog::warn("GPUDIAG_TREE=on, but the ranks are not laid out in equal blocks of "
                   "LOCAL_WORLD_SIZE (rank {} is local rank {} of {}, {} ranks): one store and "
                   "one judge serve the job",
                   w.rank, w.local_rank, per, w.size);
    return std::nullopt;
  }
  TreePlan p;
  p.layout.world = w.size;
  p.layout.per_node = per;
  p.layout.group_nodes = tree_group_nodes(t);
  p.node = p.layout.node_of(w.rank);
  if (p.layout.levels() > storewire::kMostClaimLevel)
    throw UsageError("GPUDIAG_TREE_GROUP_NODES=" + std::to_string(p.layout.group_nodes) + " makes " +
                         std::to_string(p.layout.levels()) + " levels of judges for " +
                         std::to_string(p.layout.nodes()) + " nodes, more than " +
                         std::to_string(storewire::kMostClaimLevel),
                     "raise GPUDIAG_TREE_GROUP_NODES (128: 3 levels serve 2 million nodes)");
  p.node_port = t.node_port > 0 ? t.node_port : std::min(master_port + 1, 65534);
  if (p.node_port + p.layout.levels() > 65535)
    throw UsageError("GPUDIAG_TREE_PORT=" + std::to_string(p.node_port) + " leaves no port for " +
                         std::to_string(p.layout.levels()) + " levels of judges above it",
                     "give a lower GPUDIAG_TREE_PORT");
  p.group_port = p.node_port + 1;
  p.why = on ? "GPUDIAG_TREE=on" : std::to_string(w.size) + " ranks (GPUDIAG_TREE=auto)";
  return p;
}

TreeHost::TreeHost(const TreePlan& plan, TreeConnect connect)
    : plan_(plan), c_(std::move(connect)) {
  if (!c_.reviewer) throw std::logic_error("TreeHost: no reviewer for its judges");
  const auto& L = plan_.layout;
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.port = plan_.node_port;
  o.token = c_.token;
  o.secret = c_.secret;
  o.world_size = L.world;
  o.expected_clients = L.per_node + 8;
  o.served_by = "the leader of " + L.node_label(plan_.node) + " (" + c_.leader +
                (c_.leader.find("pid") == std::string::npos ? ", pid " + std::to_string(getpid())
                                                             : "") +
                ") [" + c_.host + "]";
  o.owned_keys = true;
  o.launcher_clients = true;  // the leader's judge
  o.leader_judges = true;
  o.deaths_from_connections = c_.deaths_from_connections;
  // Its judge (and, under gpudiag launch, its death reports) run in this
  // process; any other connection is a rank or claims a place (key_owners.h).
  o.tree_role = TreeStoreRole{TreeStoreRole::Kind::node, plan_.node, L};
  o.own_process_trusted = true;
  node_server_ = std::make_unique<TcpStoreServer>(o);
  // This node hosts the judge of every level whose first node it is.
  for (int l = 1; l <= L.levels() && plan_.node % L.span(l) == 0; ++l) {
    const int j = L.judge_of_node(l, plan_.node);
    TcpStoreServerOptions g;
    g.port = plan_.node_port + l;
    g.token = c_.token;
    g.secret = c_.secret;
    g.world_size = L.group_nodes + 8;
    g.served_by = "the judge of " + L.label(l, j) + " [" + c_.host + "]";
    // Its children's judges claim their places; nobody else writes here.
    g.owned_keys = true;
    g.tree_role = TreeStoreRole{TreeStoreRole::Kind::group, j, L, l};
    g.own_process_trusted = true;
    group_servers_.push_back(std::make_unique<TcpStoreServer>(g));
  }
  start([this] { run_node(); });
  for (int l = 1; l <= static_cast<int>(group_servers_.size()); ++l) start([this, l] { run_group(l); });
  if (plan_.node == 0) start([this] { run_root(); });
}

void TreeHost::start(std::function<void()> what) {
  threads_.emplace_back([this, what = std::move(what)] {
    what();
    std::lock_guard lock(mu_);
    ++done_;
    ended_.notify_all();
  });
}

/// A group judge's store at "host:port", as the root lists it.
std::unique_ptr<Store> TreeHost::connect_at(const std::string& at, std::uint32_t claim,
                                            double within_s) {
  const auto colon = at.rfind(':');
  auto port = colon == std::string::npos
                  ? std::nullopt
                  : storelimits::parse_bounded(at.substr(colon + 1), 1, 65535);
  if (!port)
    throw Error(ExitCode::broken,
                "the root lists a group judge's store at '" + storelimits::store_text(at, 64) + "'");
  // The judge published its address once it listened: a refusal means it is
  // gone (a connection left unanswered is waited for, up to `within_s`).
  return std::make_unique<TcpStoreClient>(at.substr(0, colon), static_cast<int>(*port), c_.token,
                                          Deadline::after_seconds(within_s), c_.secret, claim,
                                          Deadline::after(kRefusedIsGone));
}

/// The key at the root where judge `index` of `level` says where its store is.
static std::string address_key(int level, int index) {
  return "tree/" + TreeLayout::level_key(level) + "/" + std::to_string(index);
}

std::unique_ptr<Store> TreeHost::connect_judge(int level, int index, std::uint32_t claim,
                                               double within_s) {
  // Each judge's address is asked of the root once (a connection of its own,
  // closed once read: the root's store serves the judges, not every node's
  // leader); a sweep's partners in another group would ask every round.
  std::string at;
  {
    std::lock_guard lock(addresses_mu_);
    auto it = addresses_.find({level, index});
    if (it != addresses_.end()) at = it->second;
  }
  if (at.empty()) {
    at = c_.root(claim)->get(address_key(level, index), Deadline::after_seconds(c_.timeout_s));
    std::lock_guard lock(addresses_mu_);
    addresses_[{level, index}] = at;
  }
  return connect_at(at, claim, within_s);
}

std::vector<std::unique_ptr<Store>> TreeHost::stores_beyond(int level, std::uint32_t claim) {
  const auto& L = plan_.layout;
  std::vector<std::unique_ptr<Store>> out;
  for (int l = level + 2; l <= L.levels(); ++l) {
    const int j = L.judge_of_node(l, plan_.node);
    out.push_back(std::make_unique<LazyStore>(
        [this, l, j, claim] { return connect_judge(l, j, claim, std::min(c_.timeout_s, kGroupConnectS)); },
        "the store of " + L.label(l, j)));
  }
  if (level + 1 <= L.levels())  // the root's, unless it is the parent
    out.push_back(std::make_unique<LazyStore>([this, claim] { return c_.root(claim); },
                                              "the job's store"));
  return out;
}

void TreeHost::run_node() {
  try {
    const auto& L = plan_.layout;
    const Deadline d = Deadline::after_seconds(c_.timeout_s);
    TcpStoreClient below("127.0.0.1", plan_.node_port, c_.token, d, c_.secret);
    // Every connection of this judge away from its own store speaks for its node.
    const std::uint32_t me = storewire::node_claim(plan_.node);
    std::unique_ptr<Store> parent;
    if (L.grouped()) {
      // Its group's judge says where its store is, at the root. One that
      // died before this leader reached it (it listened when it published
      // the address) is lost as one that dies later is (Relay::lose_parent):
      // this node reports a level up.
      const int g = L.group_of_node(plan_.node);
      parent = std::make_unique<LazyStore>(
          [this, g, me] { return connect_judge(1, g, me, std::min(c_.timeout_s, kGroupConnectS)); },
          "the store of " + L.group_label(g));
    } else {
      parent = c_.root(me);
    }
    auto beyond = stores_beyond(0, me);
    auto reviewer = c_.reviewer();
    auto o = options(plan_, RelayLevel::node, plan_.node, c_.timeout_s);
    // Other groups' records: rank 0's report at the end, a sweep's partners
    // every round (each judge's address asked of the root once: connect_judge).
    o.connect_judge = [this, me](int level, int index) {
      return connect_judge(level, index, me, std::min(c_.timeout_s, kGroupConnectS));
    };
    o.below = &below;
    o.above = parent.get();
    for (auto& b : beyond) o.beyond.push_back(b.get());
    o.reviewer = reviewer.get();
    Relay relay(o);
    run_relay(relay, stop_);
  } catch (const std::exception& e) {
    spdlog::warn("the leader of node {} stopped judging: {}", plan_.node, e.what());
  }
}

void TreeHost::run_group(int level) {
  const auto& L = plan_.layout;
  const int j = L.judge_of_node(level, plan_.node);
  try {
    const std::uint32_t me = storewire::group_claim(j, level);
    const int port = plan_.node_port + level;
    // Says where its store is, at the root, once it listens.
    c_.root(me)->set(address_key(level, j), c_.address + ":" + std::to_string(port),
                     Deadline::after_seconds(c_.timeout_s));
    TcpStoreClient below("127.0.0.1", port, c_.token, Deadline::after_seconds(c_.timeout_s),
                         c_.secret);
    std::unique_ptr<Store> parent;
    if (level == L.levels()) {
      parent = c_.root(me);
    } else {
      const int up = L.judge_of_node(level + 1, plan_.node);
      parent = std::make_unique<LazyStore>(
          [this, level, up, me] {
            return connect_judge(level + 1, up, me, std::min(c_.timeout_s, kGroupConnectS));
          },
          "the store of " + L.label(level + 1, up));
    }
    auto beyond = stores_beyond(level, me);
    auto reviewer = c_.reviewer();
    auto o = relay_options(L, RelayLevel::group, j,
                           std::chrono::milliseconds(static_cast<long>(c_.timeout_s * 1000)),
                           kSlackPerLevel, level);
    o.below = &below;
    o.above = parent.get();
    for (auto& b : beyond) o.beyond.push_back(b.get());
    o.reviewer = reviewer.get();
    Relay relay(o);
    run_relay(relay, stop_);
  } catch (const std::exception& e) {
    spdlog::warn("the judge of {} stopped: {}", L.label(level, j), e.what());
  }
}

void TreeHost::run_root() {
  try {
    auto root = c_.root(storewire::kRootClaim);
    auto reviewer = c_.reviewer();
    auto o = options(plan_, RelayLevel::root, 0, c_.timeout_s);
    o.below = root.get();
    o.reviewer = reviewer.get();
    Relay relay(o);
    run_relay(relay, stop_);
  } catch (const std::exception& e) {
    spdlog::warn("the root judge stopped: {}", e.what());
  }
}

TreeHost::~TreeHost() {
  // The judges end when every child said goodbye; a child that never does
  // (it hangs) holds them at most a few timeouts.
  const auto until = Deadline::after_seconds(3 * c_.timeout_s + 10);
  {
    std::unique_lock lock(mu_);
    ended_.wait_until(lock, until.when(),
                      [&] { return done_ >= static_cast<int>(threads_.size()); });
  }
  stop_ = true;
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

}  // namespace gpudiag
