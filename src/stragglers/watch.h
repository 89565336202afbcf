// The launcher's straggler watch: a Unix datagram socket the node's ranks
// send their arrivals to (record.h), read by a thread of its own that feeds
// the judge and prints a line the moment a rank is named or recovers, and
// rewrites the Prometheus textfile then; finish() reads what the ranks sent
// last and returns the end summary.
//
// The socket lives in the launcher's private folder (mode 0700, so only the
// job's user reaches it); where that path is too long for a socket address,
// a name in the abstract namespace with 64 random bits. What arrives is
// parsed without trust (record.h); the thread never blocks the launcher and
// a full socket costs the ranks records, never time.
//
// Where a rank's NCCL flight recorder gives its collectives' kernel times
// (`d` records), a second judge reads them (judge.h): a rank whose GPU, not
// its host, is late. A rank both judges name in a group is said once, by the
// host-side one, live and in the summary (render.h's merged()).
//
// In a job of several nodes each global rank's clock domain is its node
// (judge.h), the node's records wait in an outbox (share.h) that exchange.h
// publishes for the other launchers, and theirs come in through
// take_shared(): every launcher judges every rank of the job.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "stragglers/judge.h"
#include "stragglers/render.h"
#include "stragglers/share.h"
#include "store/socket.h"

namespace gpudiag::stragglers {

struct WatchSettings {
  std::string folder;      ///< where the socket goes
  int nproc = 1;           ///< ranks on this node
  int rank_base = 0;       ///< this node's first global rank
  int world = 1;           ///< ranks in the job
  std::string host;        ///< this node's name, in labels
  std::string prometheus;  ///< textfile to keep current ("" none)
  int node = 0;            ///< this node's rank in the job
  int nnodes = 1;          ///< nodes in the job, each of `nproc` ranks
};

struct Report {
  JudgeSummary summary;
  Heard heard;
  std::vector<std::string> lines;  ///< the end summary (render.h)
  nlohmann::json json;
};

/// The report of a job whose ranks could not be measured (not Python).
Report unmeasured();
/// `text` and a newline on stderr, in one write.
void say_line(const std::string& text);

class Watch {
 public:
  /// Binds the socket and starts the thread. Throws gpudiag::Error when it cannot.
  explicit Watch(WatchSettings settings);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  /// The ranks' GPUDIAG_STRAGGLERS: a path, or "@name" for an abstract name.
  const std::string& address() const { return address_; }
  /// Stops the thread after it read everything sent so far (once).
  void stop();
  /// stop(), then the summary.
  Report finish();

  /// Several nodes: this node's value for the store (share.h), a new batch.
  std::string shared(bool final);
  /// Several nodes: another node's value, read from the store; its batches
  /// not taken yet go to the judge. Returns whether the node said it ended.
  bool take_shared(int node, const std::string& text);

 private:
  void run();
  void take(const char* data, std::size_t size);
  void drain();
  void write_prometheus();
  std::string label(int rank) const;
  void say_events(const std::vector<Event>& events, std::vector<std::string>& lines);
  std::vector<Event> add(int rank, const Arrival& a);  ///< to the judge its kind goes to
  void declare(const GroupDecl& g);                    ///< to both judges
  JudgeSummary summary() const;                        ///< both judges' (merged())

  WatchSettings s_;
  std::string address_;
  net::Fd fd_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  ///< the judge and the counts, read by finish()
  std::mutex prom_mu_;  ///< one writer of the textfile at a time (taken before mu_)
  Judge judge_;    ///< the ranks' host-side arrivals
  Judge kernels_;  ///< their NCCL kernel times (judge.h), where the flight recorder gives them
  std::set<std::pair<int, int>> quiet_;  ///< (rank, group) the kernels named while judge_ did
  Heard heard_;
  Outbox outbox_;                          ///< several nodes: what the others get
  std::map<int, std::string> hosts_;       ///< other nodes' hosts, as they said
  std::map<int, std::int64_t> taken_;      ///< other nodes' last batch taken
  std::thread thread_;
};

}  // namespace gpudiag::stragglers
