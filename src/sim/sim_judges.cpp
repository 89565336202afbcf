// The simulator's judges above the nodes (see simulator.h, sim_tree.h): the
// root's process (its store and its judge) and processes that each serve the
// stores of a block of judges of one level (groups, supergroups, ...) and run
// those judges, each with a real TCP connection to its parent's store and,
// opened only when its parent is lost, to the stores above that. A judge
// whose host dies (Plan::dead_hosts) closes its store after the communicator
// checkpoint and stops, as its process ending would.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "checks/tree_review.h"
#include "store/lazy_store.h"
#include "tree/relay.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "sim/sim_common.h"
#include "sim/sim_traffic.h"
#include "sim/sim_tree.h"

namespace gpudiag::sim {

/// A judge's children get the timeout and, per level below it, the slack a
/// job's judges give (tree/relay.h).
RelayOptions relay_options(const Plan& p, const SimOptions& o, RelayLevel level, int index,
                           int height) {
  return gpudiag::relay_options(p.layout, level, index, ms(o.timeout_s), kSlackPerLevel,
                                height);
}

void Uplinks::fill(RelayOptions& o) const {
  o.above = above.get();
  o.beyond.clear();
  for (const auto& b : beyond) o.beyond.push_back(b.get());
}

Uplinks uplinks(const Plan& p, const Ports& ports, const std::string& secret, int level,
                int index) {
  const auto& L = p.layout;
  Uplinks u;
  auto client = [&secret](int port, double within_s) {
    return std::make_unique<TcpStoreClient>("127.0.0.1", port, kTreeToken,
                                            Deadline::after_seconds(within_s), secret);
  };
  const int top = L.levels() + 1;  // the root's level
  // Every connection counted as one to the store of its level (sim_traffic.h);
  // those past the parent apart: they serve only when the parent is lost.
  u.above = std::make_unique<CountingStore>(
      client(ports.of(level + 1, L.judge_above(std::min(level + 1, top - 1), level, index)), 60),
      level + 1, 0);
  for (int l = level + 2; l <= top; ++l) {
    const int port = ports.of(l, l < top ? L.judge_above(l, level, index) : 0);
    // A judge's store on loopback accepts at once; one that refuses for a
    // moment is gone (a real leader gives it a few seconds, in parallel with
    // every other: the simulator's threads take its leaders in turn).
    const double within_s = l < top ? 0.2 : 30;
    u.beyond.push_back(std::make_unique<CountingStore>(
        std::make_unique<LazyStore>(
            [port, secret, within_s]() -> std::unique_ptr<Store> {
              return std::make_unique<TcpStoreClient>("127.0.0.1", port, kTreeToken,
                                                      Deadline::after_seconds(within_s), secret);
            },
            "127.0.0.1:" + std::to_string(port)),
        l, 2));
  }
  return u;
}

/// The root's process: its store and its judge.
void root_process(const Plan& p, const SimOptions& o, const std::string& secret, int out,
                  int control) {
  auto server = judge_store(secret, p.layout.groups() + 2 * p.layout.group_nodes + 16);
  write_line(out, std::to_string(server->port()));
  TcpStoreClient self_tcp("127.0.0.1", server->port(), kTreeToken, Deadline::after_seconds(30),
                          secret);
  CountingStore self(self_tcp, p.layout.levels() + 1, 1);
  CheckTreeReviewer reviewer;
  auto ro = relay_options(p, o, RelayLevel::root, 0);
  ro.below = &self;
  ro.reviewer = &reviewer;
  Relay root(ro);
  for (int seq = 0; seq < kCheckpointCount; ++seq) root.collect(seq, Deadline::after_seconds(300));
  write_line(out, "bytes " + std::to_string(root.bytes_below()));
  write_line(out, traffic().line());
  wait_released(control);
  write_line(out, std::to_string(peak_rss_kib()));
}

void judges_process(const Plan& p, const SimOptions& o, const std::string& secret,
                    const Ports& ports, int level, int j0, int j1, int out, int control) {
  std::vector<std::unique_ptr<TcpStoreServer>> servers;
  std::string line;
  for (int j = j0; j < j1; ++j) {
    servers.push_back(judge_store(secret, p.layout.group_nodes + 16));
    line += (line.empty() ? "" : " ") + std::to_string(servers.back()->port());
  }
  write_line(out, line);
  std::vector<long long> up(j1 - j0, 0);
  std::vector<std::thread> judges;
  for (int j = j0; j < j1; ++j)
    judges.emplace_back([&, j] {
      try {
        TcpStoreClient self_tcp("127.0.0.1", servers[j - j0]->port(), kTreeToken,
                                Deadline::after_seconds(30), secret);
        CountingStore self(self_tcp, level, 1);
        Uplinks links = uplinks(p, ports, secret, level, j);
        CheckTreeReviewer reviewer;
        auto ro = relay_options(p, o, RelayLevel::group, j, level);
        ro.below = &self;
        links.fill(ro);
        ro.reviewer = &reviewer;
        Relay relay(ro);
        for (int seq = 0; seq < kCheckpointCount; ++seq) {
          if (p.judge_gone(level, j, seq)) {
            servers[j - j0].reset();  // the judge's process ends: its store goes with it
            break;
          }
          relay.collect(seq, Deadline::after_seconds(300));
          relay.pass_down(seq);
        }
        up[j - j0] = static_cast<long long>(relay.bytes_up());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gpudiag-sim: the judge of %s: %s\n",
                     p.layout.label(level, j).c_str(), e.what());
      }
    });
  for (auto& t : judges) t.join();
  long long total = 0;
  for (auto b : up) total += b;
  write_line(out, "bytes " + std::to_string(total));
  write_line(out, traffic().line());
  wait_released(control);
  write_line(out, std::to_string(peak_rss_kib()));
}

}  // namespace gpudiag::sim
