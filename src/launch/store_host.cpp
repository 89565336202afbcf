// StoreHost: see store_host.h. Node 0 (or, under a rendezvous, the launcher
// that binds the endpoint's port first) serves the store from this process;
// every launcher keeps one client for the rendezvous and for death notices.
#include "launch/store_host.h"

#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "store/socket.h"
#include "util/env.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "sweep/tree_results.h"
#include "util/error.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

/// Whether `host` names an address of this machine: a UDP socket binds to it.
bool is_local_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "0", &hints, &res) != 0) return false;
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  for (auto* ai = res; ai; ai = ai->ai_next) {
    net::Fd s(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s && ::bind(s.get(), ai->ai_addr, ai->ai_addrlen) == 0) return true;
  }
  return false;
}

}  // namespace

void StoreHost::on_job_start(JobInfo& job) {
  // One node (under any rendezvous): no other launcher needs the secret.
  if (!secret_ && rounds_ && rounds_->connected() && !rounds_->secret().empty())
    secret_ = JobSecret{rounds_->secret(), "drawn by gpudiag launch"};  // the rounds' store's
  if (!secret_ && job.nnodes == 1)
    secret_ = JobSecret{random_secret(), "drawn by gpudiag launch"};
  if (!secret_)
    spdlog::warn(
        "launch: the job's store is unauthenticated: {} nodes cannot share a secret "
        "gpudiag launch draws; set GPUDIAG_SECRET (or --secret-file) to the same value "
        "on every node",
        job.rendezvous ? std::string("several") : std::to_string(job.nnodes));
  if (job.rendezvous)
    meet(job);
  else if (job.node_rank == 0)
    // A port the user did not choose is taken by the server itself (port 0),
    // which leaves no window for another process to grab it.
    start_server(job, job.port_given ? job.master_port : 0);
  by_hand_ = !job.rendezvous && job.nnodes > 1 && gpudiag_ranks_;
  if (by_hand_) watcher_ = std::thread([this, job] { watch(job); });
  if (gpudiag_ranks_) {
    job.extra_env.emplace_back("GPUDIAG_STORE", "launcher");
    if (secret_) job.extra_env.emplace_back("GPUDIAG_SECRET", secret_->key);
    lead_node(job);
  }
  job_ = job;
}

void StoreHost::lead_node(JobInfo& job) {
  World w;
  w.size = job.world_size();
  w.local_size = job.nproc_per_node;
  w.rank = job.node_rank * job.nproc_per_node;
  auto plan = plan_tree(w, job.tree.get(), job.master_port);
  if (!plan) return;
  TreeConnect c;
  c.token = job.token;
  if (secret_) c.secret = secret_->key;
  const std::string addr = serving() ? "127.0.0.1" : job.master_addr;
  c.root = [addr, port = job.master_port, token = c.token, key = c.secret](std::uint32_t claim) {
    return std::unique_ptr<Store>(std::make_unique<TcpStoreClient>(
        addr, port, token, Deadline::after_seconds(60), key, claim));
  };
  const auto ip = net::local_ip_towards(job.master_addr, job.master_port);
  c.address = ip.empty() ? host_ : ip;
  c.host = host_;
  c.leader = "gpudiag launch, pid " + std::to_string(::getpid());
  c.deaths_from_connections = false;  // on_child_exit says how a rank ended
  c.reviewer = [n = w.size] { return sweep::job_reviewer(n); };
  tree_ = std::make_unique<TreeHost>(*plan, std::move(c));
  tree_node_port_ = plan->node_port;
  job.extra_env.emplace_back("GPUDIAG_TREE_LEADER", "launch");
  job.extra_env.emplace_back("GPUDIAG_TREE_PORT", std::to_string(plan->node_port));
  spdlog::info("launch: leading {} ({}): its store at 127.0.0.1:{}",
               plan->layout.node_label(plan->node), plan->why, plan->node_port);
}

void StoreHost::start_server(JobInfo& job, int port) {
  server_ = make_server(job, port);
  job.master_port = server_->port();
}

std::unique_ptr<TcpStoreServer> StoreHost::make_server(JobInfo& job, int port) {
  TcpStoreServerOptions o;
  o.port = port;
  o.token = job.token;
  if (secret_) o.secret = secret_->key;
  o.world_size = job.world_size();  // caps follow from it; refuses a too-low `ulimit -n`
  o.served_by = "gpudiag launch [" + host_ + "]";
  o.owned_keys = true;
  o.launcher_clients = true;  // every node's launcher reports its ranks' deaths
  o.torch_clients = !gpudiag_ranks_;  // a torch program's ranks use it as torchrun's agent store
  // This launcher's ranks (and their children) keep their connections,
  // silent ones included (torch 1.x keeps one that never speaks); so do the
  // other nodes' ranks and launchers, a few per address; anyone else is held
  // to the handshake timer and a few connections (tcp_store_server.h).
  o.job_peers_by_process = true;
  o.job_conns_per_ip = 2 * job.nproc_per_node + 4;
  // Under node leaders this is the tree's root: the judges claim their places
  // (key_owners.h), nobody has a launcher's rights, this process is trusted.
  if (gpudiag_ranks_) {
    World w;
    w.size = job.world_size();
    w.local_size = job.nproc_per_node;
    if (auto plan = plan_tree(w, job.tree.get(), port > 0 ? port : 29500)) {
      o.tree_role = TreeStoreRole{TreeStoreRole::Kind::root, 0, plan->layout};
      o.own_process_trusted = true;
    }
  }
  return std::make_unique<TcpStoreServer>(o);
}

void StoreHost::meet(JobInfo& job) {
  const auto where = net::host_port(job.master_addr, job.master_port);
  // The first launcher on the endpoint's host to bind its port serves it. The
  // socket layer says "already in use" for EADDRINUSE: then another launcher
  // on this host serves the endpoint (or a stranger holds the port, which the
  // token check at connection time tells apart).
  auto serve = [&](int port) -> std::unique_ptr<TcpStoreServer> {
    if (!is_local_address(job.master_addr)) return nullptr;
    try {
      return make_server(job, port);
    } catch (const UsageError& e) {
      if (std::string(e.what()).find("already in use") == std::string::npos) throw;
      return nullptr;
    }
  };
  const std::string key = secret_ ? secret_->key : std::string();
  if (rounds_) {
    rounds_->connect(job, key, serve);
    job.master_port = rounds_->port();
  } else {
    server_ = serve(job.master_port);
    if (server_) job.master_port = server_->port();
    client_ = std::make_unique<TcpStoreClient>(server_ ? "127.0.0.1" : job.master_addr,
                                               job.master_port, job.token,
                                               Deadline::after_seconds(times_.join_timeout_s), key);
  }
  NodeView mine{
      host_,        static_cast<int>(::getpid()), job.nproc_per_node, job.min_nodes, job.nnodes,
      job.node_rank};
  // Node 0 (rank 0's report and files) goes to a host named in advance.
  mine.serves = job.report_node.empty() ? serving() : job.report_node == host_;
  Membership m;
  if (rounds_) {
    auto got = rounds_->join(job, mine);
    m = {got.node_rank, got.nnodes, got.nodes};
  } else {
    try {
      m = meet_nodes(*client_, mine, times_, where);
    } catch (const Error&) {
      if (server_) wait_for_acks(*client_, 3.0);  // let the others read the verdict first
      throw;
    }
  }
  job.node_rank = m.node_rank;
  job.nnodes = m.nnodes;
  if (!job.report_node.empty() && m.node_rank == 0 &&
      std::none_of(m.nodes.begin(), m.nodes.end(),
                   [&](const NodeView& v) { return v.host == job.report_node; }))
    spdlog::warn("launch: --report-node {} is none of the {} node(s) that met; node 0 is {}",
                 clean_text(job.report_node.substr(0, 128)), m.nnodes, host_);
  spdlog::info("launch: the rendezvous at {} ({}) settled {} node(s); this one is node {}", where,
               serving() ? "served here" : "a client", m.nnodes, m.node_rank);
  // A torch program using the agent store (TORCHELASTIC_USE_AGENT_STORE=True)
  // meets in this store, as torchrun's workers meet in its agent's: its keys
  // under /worker/attempt_<round>, a prefix of each round's own.
  if (gpudiag_ranks_ || job.agent_store) return;
  // A foreign program meets its peers on its own MASTER_ADDR:MASTER_PORT, which
  // must not be the rendezvous store's: node 0 picks one and tells the others.
  const auto call = Deadline::after_seconds(times_.join_timeout_s);
  const std::string master_key =
      rounds_ ? "rdzv/" + std::to_string(job.restart_count) + "/master" : "rdzv/master";
  auto* store = client();
  if (m.node_rank == 0) {
    auto addr = net::local_ip_towards(job.master_addr, job.master_port);
    job.master_addr = addr.empty() ? "127.0.0.1" : addr;
    job.master_port = pick_free_port();
    store->set(master_key, job.master_addr + " " + std::to_string(job.master_port), call);
  } else {
    auto text = store->get(master_key, call).substr(0, 300);
    auto space = text.rfind(' ');
    int port = space == std::string::npos ? 0 : std::atoi(text.c_str() + space + 1);
    if (port < 1 || port > 65535)
      throw UsageError("launch: node 0 published a bad master address '" + clean_text(text) + "'");
    job.master_addr = text.substr(0, space);
    job.master_port = port;
  }
}

StoreHost::~StoreHost() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
}

std::optional<std::string> StoreHost::stop_reason() {
  std::lock_guard lock(mu_);
  return verdict_;
}

std::optional<std::string> StoreHost::final_stop_reason() {
  if (auto verdict = stop_reason()) return verdict;
  if (!by_hand_) return std::nullopt;
  auto* store = client();
  if (!store) return std::nullopt;
  std::vector<std::string> keys;
  for (int r = 0; r < job_.nnodes; ++r) keys.push_back("rdzv/hand/" + std::to_string(r));
  std::vector<NodeView> views;
  for (const auto& v : store->multi_get(keys, Deadline::after(std::chrono::seconds(1))))
    if (v)
      if (auto view = decode_view(*v)) views.push_back(*view);
  return disagreement(views);
}

void StoreHost::watch(JobInfo job) {
  try {
    std::unique_ptr<TcpStoreClient> c;
    while (!c && !stop_) {
      try {  // short tries: node 0 may start later, and the job may end first
        c = std::make_unique<TcpStoreClient>(
            server_ ? "127.0.0.1" : job.master_addr, job.master_port, job.token,
            Deadline::after(std::chrono::seconds(1)), secret_ ? secret_->key : std::string());
      } catch (const TimeoutError&) {
      }
    }
    if (!c) return;
    NodeView mine{
        host_,        static_cast<int>(::getpid()), job.nproc_per_node, job.nnodes, job.nnodes,
        job.node_rank};
    auto verdict = watch_hand_numbered(*c, mine, job.nnodes, server_ != nullptr,
                                       [this] { return stop_.load(); });
    std::lock_guard lock(mu_);
    verdict_ = std::move(verdict);
  } catch (const std::exception& e) {
    // The ranks meet the same store and will say what is wrong with it.
    spdlog::debug("launch: comparing the nodes' views failed: {}", e.what());
  }
}

Store* StoreHost::client() {
  if (rounds_ && rounds_->connected()) return rounds_->store();
  if (!client_ && !client_failed_) {
    try {
      std::string host = serving() ? "127.0.0.1" : job_.master_addr;
      client_ = std::make_unique<TcpStoreClient>(host, job_.master_port, job_.token,
                                                 Deadline::after(std::chrono::seconds(3)),
                                                 secret_ ? secret_->key : std::string());
    } catch (const Error& e) {
      client_failed_ = true;
      spdlog::info("cannot publish rank deaths: {}", e.one_line());
    }
  }
  return client_.get();
}

void StoreHost::on_child_exit(const ChildExit& exit) {
  // A rank that ended well is not news. One the launcher stopped itself (after
  // a sibling failed) is announced too: the other nodes' ranks, which may go
  // on without it (gpudiag sweep), then stop waiting for it at once.
  if (exit.status.ok()) return;
  // Under node leaders the death goes to this node's own store, which this
  // process serves (trusted there); its judge carries it up the tree.
  if (tree_) {
    try {
      if (!node_client_)
        node_client_ = std::make_unique<TcpStoreClient>(
            "127.0.0.1", tree_node_port_, job_.token, Deadline::after(std::chrono::seconds(3)),
            secret_ ? secret_->key : std::string());
      publish_failure(*node_client_, death_notice(exit, host_),
                      Deadline::after(std::chrono::seconds(3)), FailureKind::died, exit.rank);
    } catch (const Error& e) {
      spdlog::info("cannot publish the death of rank {}: {}", exit.rank, e.one_line());
    }
    return;
  }
  if (auto* store = client())
    publish_failure(*store, death_notice(exit, host_), Deadline::after(std::chrono::seconds(3)),
                    FailureKind::died, exit.rank);
}

// Stack reports across nodes (observer.h): a counter the first node's
// launcher raises, and one answer per node and request. Bounded: a request
// number past what was asked is ignored, answers are read with a deadline.
namespace {
constexpr const char* kStackRequest = "launch/stacks/request";
std::string stack_key(int n, int node) {
  return "launch/stacks/" + std::to_string(n) + "/" + std::to_string(node);
}
}  // namespace

int StoreHost::request_stacks() {
  if (job_.node_rank != 0 || job_.nnodes < 2) return 0;
  auto* store = client();
  if (!store) return 0;
  try {
    const auto n = store->add(kStackRequest, 1, Deadline::after(std::chrono::seconds(3)));
    return n > 0 && n < (1 << 20) ? static_cast<int>(n) : 0;
  } catch (const Error& e) {
    spdlog::warn("launch: cannot ask the other nodes for their stacks: {}", e.one_line());
    return 0;
  }
}

int StoreHost::stack_request_pending() {
  if (job_.node_rank == 0 || job_.nnodes < 2) return 0;
  const auto now = Deadline::Clock::now();
  if (now < next_stack_poll_) return 0;
  next_stack_poll_ = now + std::chrono::milliseconds(500);
  auto* store = client();
  if (!store) return 0;
  try {
    auto v = store->try_get(kStackRequest, Deadline::after(std::chrono::seconds(1)));
    if (!v || v->size() > 12) return 0;
    char* end = nullptr;
    const long n = std::strtol(v->c_str(), &end, 10);
    if (*end || n <= stacks_seen_ || n >= (1 << 20)) return 0;
    stacks_seen_ = static_cast<int>(n);
    return stacks_seen_;
  } catch (const Error&) {
    return 0;
  }
}

void StoreHost::publish_stacks(int n, const std::string& summary) {
  if (auto* store = client()) try {
      store->set(stack_key(n, job_.node_rank), summary, Deadline::after(std::chrono::seconds(3)));
    } catch (const Error& e) {
      spdlog::warn("launch: cannot give node 0 this node's stacks: {}", e.one_line());
    }
}

std::vector<std::string> StoreHost::collect_stacks(int n, Deadline deadline,
                                                   std::vector<int>& silent) {
  std::vector<std::string> keys, out;
  for (int node = 1; node < job_.nnodes; ++node) keys.push_back(stack_key(n, node));
  auto* store = client();
  if (!store) return out;
  try {
    store->wait(keys, deadline);
    auto values = store->multi_get(keys, Deadline::after(std::chrono::seconds(3)));
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i]) out.push_back(values[i]->substr(0, 1 << 16));
      else silent.push_back(static_cast<int>(i) + 1);
    }
  } catch (const Error& e) {
    spdlog::warn("launch: the other nodes' stacks: {}", e.one_line());
  }
  return out;
}

void StoreHost::on_attempt_end(const AttemptEnd& end) {
  if (rounds_ && job_.rendezvous) rounds_->after_attempt(end, end.node_fault);
}

std::string death_notice(const ChildExit& exit, const std::string& host) {
  std::string how = exit.status.describe();
  if (exit.status.signaled) how = "was " + how;
  return "rank " + std::to_string(exit.rank) + " [" + host + "-" + std::to_string(exit.local_rank) +
         "] (pid " + std::to_string(exit.pid) + ") " + how +
         (exit.stopped_by_launcher ? " (stopped by gpudiag launch on " + host +
                                         " after another of its ranks failed)"
                                   : " (seen by gpudiag launch on " + host + ")");
}

}  // namespace gpudiag::launch
