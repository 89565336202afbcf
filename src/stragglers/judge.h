// The straggler judge: from every rank's arrivals at each collective of each
// process group, which rank the others wait for, named as it happens.
//
// A collective is judged once every member's record came (a record that
// never comes, dropped or from a rank that died, is forgotten after
// `max_pending` later collectives of its group). Its arrivals are put on one
// timeline: ranks of one clock domain (one host) as they are; another host's
// by an offset estimated from the collectives themselves (a collective ends
// at nearly the same moment on every rank: the median, over recent
// collectives, of the difference between the hosts' earliest ends), so the
// clocks of different hosts are never compared raw. Each rank's lateness is
// its arrival minus the median arrival. Over the group's last `window`
// collectives, a rank is late at a collective when its lateness exceeds the
// job's own spread (`spread_factor` times the 90th percentile of the other
// ranks' lateness over the group's history, each rank against the median of
// the others) and `pace_share` of the time between collectives (the pace:
// a lateness that costs the job less than that is not worth a name; four
// times that with two ranks, where no third tells a late rank from a
// stalled machine). Lateness the rank spent waiting for a CPU (its
// arriving thread's run-queue wait beyond the members' median, as the rank
// measured it) is not counted: a busy machine that keeps each rank off
// its cores in turn makes no straggler of any; a rank that sleeps or
// computes longer waits on no run queue. A rank
// late at `late_share` of the window, costing the others at least
// `pace_share` of the pace on average, is named; a named rank late at no
// more than `recovered_share` of the window has recovered.
//
// Where the delay is, when the rank's previous collective in the group ended
// for every member (a known end) : its lateness split into the end of that
// collective (communication), the time from there to its DDP forward (data
// loading) and from the forward, or that end, to its arrival (compute), each
// against the members' median; a part holding `where_share` of the rank's
// excess over its late collectives gives the word.
//
// A judge of NCCL kernel times (`kernels`, from PyTorch's flight recorder,
// record.h's `d` lines) places no clock: a collective's kernels end together
// on every member (the last to start lets them all finish), so a rank whose
// GPU reached it late has the shortest kernel, and its lateness is the
// longest member kernel minus its own; the pace is each member's time between
// its own collectives (their creation times on its own clock), the median of
// the members'. Its episodes are `gpu`, their where "compute".
//
// Memory is bounded whatever the job's length: `max_groups` groups, their
// windows, `max_pending` collectives waiting for records each, and at most
// kMaxEpisodes named spells a group.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "stragglers/record.h"

namespace gpudiag::stragglers {

struct JudgeSettings {
  int world_size = 1;
  /// Each global rank's clock domain (its node); empty: all one.
  std::vector<int> domain_of;
  int window = 20;
  int min_judged = 10;  ///< collectives in a window before anyone is named
  double late_share = 0.4;
  double recovered_share = 0.10;
  double spread_factor = 6.0;
  double pace_share = 0.05;
  double where_share = 0.6;
  int max_groups = 64;
  int max_pending = 64;
  int max_members = 4096;
  bool kernels = false;  ///< the records are NCCL kernel times (above)
};

inline constexpr int kMaxEpisodes = 32;

/// A rank named, or recovered, or its spell as the end summary says it.
struct Episode {
  int rank = 0;
  int group = 0;
  std::vector<int> members;  ///< the group's global ranks
  double late_ms = 0;        ///< median lateness where it was late
  double share = 0;          ///< of the collectives judged, where it was late
  std::int64_t from_seq = 0, to_seq = -1;  ///< -1: still named
  std::int64_t named_at = 0;  ///< the collective whose judging named it
  std::int64_t judged = 0;  ///< collectives judged over the spell
  std::string where;        ///< "data loading", "compute", "communication" or ""
  std::string op;           ///< the collective it was late at most
  bool gpu = false;         ///< seen in NCCL's kernel times: its GPU was late
};

struct Event {
  bool recovered = false;  ///< false: named now
  Episode episode;
  double share_now = 0;  ///< its share of late collectives in the window now
};

struct GroupCount {
  int group = 0;
  int members = 0;
  std::int64_t judged = 0;
};

struct JudgeSummary {
  std::vector<GroupCount> groups;
  std::vector<Episode> episodes;  ///< every spell, still named ones with to_seq -1
  std::int64_t incomplete = 0;    ///< collectives forgotten without every record
  std::int64_t untracked = 0;     ///< records of groups past max_groups or unknown
  std::int64_t kernels = 0;       ///< collectives judged by their NCCL kernel times (merged())
};

class Judge {
 public:
  explicit Judge(JudgeSettings settings);

  /// A group's members (global ranks), as a rank declared it; the first
  /// declaration stands. Group 0 is the job's default group, every rank.
  void declare_group(const GroupDecl& group);
  /// One rank's record; the events of the collectives it completed.
  std::vector<Event> add(int rank, const Arrival& arrival);
  JudgeSummary summary() const;
  /// Whether `rank` is named in `group` now.
  bool names(int rank, int group) const;

 private:
  struct Slot {
    bool have = false;
    std::int64_t a = 0, e = 0, f = 0;
    std::int64_t q = 0;  ///< run-queue wait since the rank's last arrival (0: not known)
    std::int64_t k = 0;  ///< NCCL kernel time (kernels judge)
  };
  struct Pending {
    std::string op;
    std::vector<Slot> slots;
    int have = 0;
  };
  struct Seen {
    std::int64_t seq = 0;
    double med = 0;                ///< the median arrival, on the common timeline
    std::vector<double> late;      ///< by member
    std::vector<double> comm, load, comp;  ///< by member: excess over the median (ns)
    std::string op;
  };
  struct RankState {
    bool named = false;
    int episode = -1;  ///< index in episodes_ while named
    std::vector<double> lates;  ///< lateness at late collectives of the spell (bounded)
    std::int64_t late_count = 0;
    double comm = 0, load = 0, comp = 0;
    std::map<std::string, int> ops;
  };
  struct Group {
    std::vector<int> members;
    std::vector<int> index_of;  ///< global rank -> member index, -1
    std::map<std::int64_t, Pending> pending;
    std::deque<Seen> window;
    std::deque<std::vector<double>> history;  ///< lateness by member, longer than the window
    std::vector<Slot> last_ends;  ///< the last judged collective's, by member
    std::int64_t last_seq = -2;
    std::int64_t judged = 0;
    std::vector<RankState> ranks;
    std::map<int, std::deque<double>> offsets;  ///< domain -> recent offset estimates (ns)
    std::vector<std::int64_t> origin;  ///< kernels judge: each member's first creation time
  };

  Group* group_for(int id, bool create);
  /// The arrivals on one timeline (clock domains shifted); false: not yet placeable.
  bool place(Group& g, const Pending& p, std::vector<double>& arrive, std::vector<double>& ends,
             std::vector<double>& fwd);
  void judge(int id, Group& g, std::int64_t seq, Pending& p, std::vector<Event>& events);
  std::vector<double> thresholds(const Group& g, double pace) const;
  void decide(int id, Group& g, std::vector<Event>& events);
  int domain(int rank) const;

  JudgeSettings s_;
  std::map<int, Group> groups_;
  std::vector<Episode> episodes_;
  std::int64_t incomplete_ = 0, untracked_ = 0;
};

/// The word for where a delay is, from the summed excess of each part.
std::string where_word(double comm, double load, double comp, double share);

}  // namespace gpudiag::stragglers
