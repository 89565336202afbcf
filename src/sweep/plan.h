// gpudiag sweep's plan: which ranks meet in each round, and what the rounds
// say about each node. Pure functions and one planner object, run by the
// judge (rank 0); every other rank only decodes the layout and the round it
// is sent and computes its own partner from them.
//
// Layout: a node is a host; its ranks, in rank order, have local indices
// 0..L-1. The layout travels as "block L N" (node = rank / L), "cyclic N"
// (node = rank % N) or, for any other placement, the node of every rank.
//
// Rounds, in stages:
//   within nodes  the ranks of each node pair up in turns (the circle method
//                 of links.h), every node at once;
//   node pairs    turns of the circle method over the nodes: node A's local
//                 rank i meets node B's local rank i, so every rail is
//                 measured; at least two turns (three for an odd count) so
//                 every node has two partners, more while --time-budget
//                 allows;
//   deciding      each node with a bad test (slow or failed) that the tests
//                 so far do not explain meets a node known good (every test
//                 of it passed); a bad result there names it, a good one
//                 clears it. Up to two such rounds.
// A test is bad when it failed or its bandwidth is below the slow fraction
// (PlannerOptions) of its class's reference (the upper quartile of the class: tests within nodes,
// tests across nodes), as the link test judges links (links.h).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag::sweep {

struct Layout {
  std::vector<int> node_of;               ///< rank -> node (-1: not in the sweep)
  std::vector<std::vector<int>> members;  ///< node -> its ranks, ascending
  std::vector<std::string> hosts;         ///< node -> host (the judge's; "" elsewhere)
  int nodes() const { return static_cast<int>(members.size()); }
  int ranks() const { return static_cast<int>(node_of.size()); }
  /// Position of `rank` among its node's ranks; -1 when not in the sweep.
  int local_index(int rank) const;
};

/// Nodes in order of their first rank; nullopt hosts (ranks that never
/// arrived) are left out.
Layout make_layout(const std::vector<std::optional<std::string>>& host_of_rank);
std::string encode_layout(const Layout& l);
/// Throws gpudiag::Error on text that is not a layout of `ranks` ranks.
Layout decode_layout(const std::string& text, int ranks);

enum class RoundKind { within, circle, pairs, done };

struct Round {
  int index = 0;  ///< 1-based
  RoundKind kind = RoundKind::done;
  int turn = 0;                                ///< within / circle: the circle method's turn
  std::vector<std::pair<int, int>> node_pairs;  ///< pairs: nodes that meet
  std::string stage() const;                   ///< "within nodes", "node pairs", "deciding"
};

std::string encode_round(const Round& r);
/// Throws gpudiag::Error on text that is not a round of a layout of `nodes`.
Round decode_round(const std::string& text, int nodes);

/// `rank`'s partner in `round`, or -1 when it rests.
int partner_in(const Round& round, const Layout& layout, int rank);

/// One rank pair's measurement, as both ends report it.
struct PairResult {
  int round = 0;
  int a = 0, b = 0;  ///< ranks, a < b
  bool ok = false;
  double gbps = 0;   ///< each way
  std::string why;   ///< when not ok
};

/// One test of a node: within it, or against a partner node.
struct NodeTest {
  int round = 0;
  std::string stage;
  int partner = -1;      ///< node (-1: within the node)
  bool failed = false;
  double gbps = 0;       ///< the weakest rank pair's
  std::string where;     ///< "ranks 3<->11" of the weakest or failed pair
  std::string why;       ///< a failure's reason
  bool bad = false;      ///< set by the judgement
};

enum class NodeState { ok, slow, failed, missing, suspect };
const char* state_name(NodeState s);

struct NodeVerdict {
  int node = 0;
  NodeState state = NodeState::ok;
  std::optional<NodeTest> evidence;  ///< the test that decided it
  double threshold_gbps = 0;         ///< below this the evidence's class is slow
  std::string reason;                ///< missing / suspect / failed: in words
  /// SLOW or FAILED across nodes: how many tests found it so (deciding tests
  /// in a row against nodes known good, or partners that passed elsewhere).
  int confirmations = 0;
};

/// A deciding test speaks against its suspect only when the next one, against
/// another node known good, says the same: one slow measurement on a busy
/// machine never excludes a node.
inline constexpr int kConfirmations = 2;

struct PlannerOptions {
  double time_budget_s = 300;
  int max_retest_rounds = 3;
  /// Rounds within nodes. The host backend leaves them out: between two
  /// processes of one host it measures the kernel's loopback and the CPUs,
  /// not a link of the node.
  bool within = true;
  /// A test below this fraction of its class's reference is bad: the link
  /// test's kSlowFraction (0.5) on GPUs; the host backend's exchanges move
  /// through the CPUs, whose share varies with everything else a node runs,
  /// so there only a link at a quarter of its peers' speed is slow.
  double slow_fraction = 0.5;
};

/// The planner's options for a backend: on GPUs (`gpu`) rounds within nodes
/// and the link test's fraction (0.5); on the host backend neither within-node
/// rounds nor a fraction above a quarter.
PlannerOptions planner_options(bool gpu, double time_budget_s);

/// The judge's side: hands out rounds, takes their results, decides.
class Planner {
 public:
  Planner(Layout layout, PlannerOptions options);
  /// The next round to run (kind done when the sweep is over), given the
  /// seconds the sweep has taken so far.
  Round next(double elapsed_s);
  /// What `round` measured; `gone` are ranks that stopped answering by its end.
  void record(const Round& round, const std::vector<PairResult>& results,
              const std::vector<int>& gone);
  /// What the job knows of a gone rank ("rank 8 [node5-0] (pid 42) was
  /// killed by SIGKILL ..."): added to its node's reason, the first per node.
  void note_gone(int rank, const std::string& note);
  /// Hosts of the pool that sent no rank: MISSING, after the layout's nodes.
  void never_arrived(const std::vector<std::string>& hosts);
  /// Every node's host, the layout's then those that never arrived (the
  /// verdicts' `node` indexes it).
  std::vector<std::string> hosts() const;
  /// A node whose rank failed before the rounds (its device, its memory):
  /// FAILED with `why`, and left out of every round.
  void node_failed(int node, const std::string& why);
  /// Every node's verdict from everything recorded so far.
  std::vector<NodeVerdict> verdicts() const;
  const Layout& layout() const { return layout_; }
  /// Every test so far, and the nodes of each (A, B; B = A within a node).
  const std::vector<NodeTest>& tests() const { return tests_; }
  const std::vector<std::pair<int, int>>& test_nodes() const { return test_nodes_; }
  int rounds_run() const { return static_cast<int>(durations_.size()); }

 private:
  struct Judged;
  Judged judge() const;
  std::vector<std::pair<int, int>> retest_pairs() const;

  Layout layout_;
  PlannerOptions opt_;
  int index_ = 0;
  int within_turns_ = 0, within_done_ = 0;
  int circle_min_ = 0, circle_done_ = 0, circle_max_ = 0;
  int retests_done_ = 0;
  double last_start_ = 0;
  std::vector<double> durations_;
  std::vector<NodeTest> tests_;                ///< per node test, node A's view
  std::vector<std::pair<int, int>> test_nodes_;  ///< (A, B) of tests_ (B = A within)
  std::vector<int> gone_round_;                ///< per node: the round its ranks went (0 none)
  std::vector<std::string> gone_why_;
  std::vector<bool> failed_early_;  ///< node_failed: FAILED whatever its rank count
  std::vector<bool> rank_gone_;     ///< per rank: stopped answering
  std::vector<bool> noted_;         ///< per node: note_gone added a note
  std::vector<std::string> absent_;  ///< never_arrived's hosts
};

/// Upper quartile of `v` (the reference of a class); 0 when empty.
double upper_quartile(std::vector<double> v);

}  // namespace gpudiag::sweep
