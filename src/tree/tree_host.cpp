// The tree's choice and a leader's stores and judges (see tree_host.h). The
// judges review with the check's reviewer, and a sweep's round results with
// the sweep's (sweep/tree_results.h), chosen by the checkpoint's name.
#include "tree/tree_host.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>

#include "checks/tree_review.h"
#include "sweep/tree_results.h"
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

/// A judge's children get the check's timeout and a second per level below it.
RelayOptions options(const TreePlan& p, RelayLevel level, int index, double timeout_s) {
  return relay_options(p.layout, level, index,
                       std::chrono::milliseconds(static_cast<long>(timeout_s * 1000)),
                       std::chrono::seconds(1));
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
  p.node_port = t.node_port > 0 ? t.node_port : std::min(master_port + 1, 65534);
  p.group_port = p.node_port + 1;
  p.why = on ? "GPUDIAG_TREE=on" : std::to_string(w.size) + " ranks (GPUDIAG_TREE=auto)";
  return p;
}

TreeHost::TreeHost(const TreePlan& plan, TreeConnect connect)
    : plan_(plan), c_(std::move(connect)) {
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
  const bool group_host = L.grouped() && plan_.node % L.group_nodes == 0;
  if (group_host) {
    TcpStoreServerOptions g;
    g.port = plan_.group_port;
    g.token = c_.token;
    g.secret = c_.secret;
    g.world_size = L.group_nodes + 8;
    g.served_by = "the judge of " + L.group_label(L.group_of_node(plan_.node)) + " [" + c_.host + "]";
    // Its nodes' leaders claim their nodes; nobody else writes here.
    g.owned_keys = true;
    g.tree_role = TreeStoreRole{TreeStoreRole::Kind::group, L.group_of_node(plan_.node), L};
    g.own_process_trusted = true;
    group_server_ = std::make_unique<TcpStoreServer>(g);
  }
  start(&TreeHost::run_node);
  if (group_host) start(&TreeHost::run_group);
  if (plan_.node == 0) start(&TreeHost::run_root);
}

void TreeHost::start(void (TreeHost::*what)()) {
  threads_.emplace_back([this, what] {
    (this->*what)();
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
  return std::make_unique<TcpStoreClient>(at.substr(0, colon), static_cast<int>(*port), c_.token,
                                          Deadline::after_seconds(within_s), c_.secret, claim);
}

void TreeHost::run_node() {
  try {
    const auto& L = plan_.layout;
    const Deadline d = Deadline::after_seconds(c_.timeout_s);
    TcpStoreClient below("127.0.0.1", plan_.node_port, c_.token, d, c_.secret);
    std::unique_ptr<Store> root, group;
    // Every connection of this judge away from its own store speaks for its node.
    const std::uint32_t me = storewire::node_claim(plan_.node);
    if (L.grouped()) {
      // The group's judge says where its store is, at the root; the root is
      // reached again only if that judge is lost.
      const int g = L.group_of_node(plan_.node);
      root = std::make_unique<LazyStore>([this, me] { return c_.root(me); }, "the job's store");
      const auto at = root->get("tree/group/" + std::to_string(g), d);
      try {
        group = connect_at(at, me, std::min(c_.timeout_s, kGroupConnectS));
      } catch (const TimeoutError& e) {
        // Its judge died before this leader reached it (it listened when it
        // published the address): this node reports to the root, as a
        // leader whose judge is lost later does (Relay::lose_parent).
        spdlog::info("node {}: lost the judge of group {}: {}; reporting to the root", plan_.node,
                     g, e.one_line());
        root->set("tree/lost/" + std::to_string(g), storelimits::store_text(e.one_line(), 512), d);
      }
    } else {
      root = c_.root(me);
    }
    sweep::SweepTreeReviewer reviewer(L.world, std::make_unique<CheckTreeReviewer>());
    auto o = options(plan_, RelayLevel::node, plan_.node, c_.timeout_s);
    // Rank 0's report reads every group's records once, at the end.
    // Other groups' records: rank 0's report at the end, a sweep's partners
    // every round. Each group's address is asked of the root once, on this
    // leader's one connection there.
    std::map<int, std::string> group_at;
    o.connect_group = [this, me, &root, &group_at](int g) -> std::unique_ptr<Store> {
      auto it = group_at.find(g);
      if (it == group_at.end())
        it = group_at.emplace(g, root->get("tree/group/" + std::to_string(g),
                                           Deadline::after_seconds(c_.timeout_s))).first;
      return connect_at(it->second, me, std::min(c_.timeout_s, kGroupConnectS));
    };
    o.below = &below;
    o.above = group ? group.get() : root.get();
    o.root = group ? root.get() : nullptr;
    o.reviewer = &reviewer;
    Relay relay(o);
    run_relay(relay, stop_);
  } catch (const std::exception& e) {
    spdlog::warn("the leader of node {} stopped judging: {}", plan_.node, e.what());
  }
}

void TreeHost::run_group() {
  try {
    const int g = plan_.layout.group_of_node(plan_.node);
    auto root = c_.root(storewire::group_claim(g));
    root->set("tree/group/" + std::to_string(g),
              c_.address + ":" + std::to_string(plan_.group_port),
              Deadline::after_seconds(c_.timeout_s));
    TcpStoreClient below("127.0.0.1", plan_.group_port, c_.token,
                         Deadline::after_seconds(c_.timeout_s), c_.secret);
    sweep::SweepTreeReviewer reviewer(plan_.layout.world, std::make_unique<CheckTreeReviewer>());
    auto o = options(plan_, RelayLevel::group, g, c_.timeout_s);
    o.below = &below;
    o.above = root.get();
    o.reviewer = &reviewer;
    Relay relay(o);
    run_relay(relay, stop_);
  } catch (const std::exception& e) {
    spdlog::warn("the judge of group {} stopped: {}", plan_.layout.group_of_node(plan_.node),
                 e.what());
  }
}

void TreeHost::run_root() {
  try {
    auto root = c_.root(storewire::kRootClaim);
    sweep::SweepTreeReviewer reviewer(plan_.layout.world, std::make_unique<CheckTreeReviewer>());
    auto o = options(plan_, RelayLevel::root, 0, c_.timeout_s);
    o.below = root.get();
    o.reviewer = &reviewer;
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
