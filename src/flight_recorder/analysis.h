// Where the ranks of a job part ways, from their flight-recorder dumps.
//
// Per process group (a name and its members: groups.h) each rank with a dump gets three
// counters: the last collective it queued (enqueued), the last whose kernel it saw start, the
// last it saw complete. Each is the larger of what pg_status says (getPgStatus: the watchdog's
// lastEnqueuedSeq, lastStartedSeq, lastCompletedSeq), where the group carries no send/recv
// (groups.cpp says why), and what the entries in its ring buffer say; the ring buffer keeps
// only the newest entries, pg_status keeps counting. Only collectives count (is_p2p entries
// carry the collective counter of their time, not their own); entries that share a seq (the
// ops of a coalesced group, ended by "nccl:coalesced") count as one, in the furthest state any
// of them reached, since only some of them own CUDA events.
//
// Findings, each naming ranks (docs/fr.md says more):
//   missing-ranks    the first seq that some ranks with a dump queued and others never did:
//                    those never reached it. The analyser's "Not all ranks joining
//                    collective" (flight_recorder/components/utils.py, error_analysis), found
//                    from the counters, so it holds where ring buffers lost the entries.
//   gpu-stopped      a rank queued seq S and never started it (never completed it, where its
//                    dumps do not time starts: TORCH_NCCL_ENABLE_TIMING) while a peer started
//                    or completed S: its stream stopped before S.
//   queued-far-past  a rank queued at least `lag` collectives past its last completed one
//                    while a peer completed at least `lag` more than it did: its CPU kept
//                    queueing after its GPU stopped completing; the collective it stopped at
//                    may be gone from every ring buffer.
//   no-dump          members without a readable dump: listed, never judged healthy.
// A rank the first three name is a cause only where it waits for nobody: causes.h reduces
// them across groups (a rank missing from one group because it waits in another, where a
// peer is missing, is a victim). suspect_ranks are the causes; waiting_ranks the others seen
// waiting for a peer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "flight_recorder/dump.h"
#include "flight_recorder/files.h"

namespace gpudiag::fr {

struct Options {
  std::int64_t lag = 4;  ///< --lag: collectives behind that make queued-far-past
};

/// One rank in one group.
struct RankTrack {
  int rank = -1;
  bool dumped = false;  ///< its dump was read
  bool known = false;   ///< its dump has entries or a pg_status of this group
  bool status_used = false;  ///< pg_status counted (groups.cpp: not where send/recv run)
  bool starts_recorded = false;
  std::int64_t enqueued = -1, started = -1, completed = -1;
};

struct Finding {
  std::string kind;  ///< "missing-ranks", "gpu-stopped", "queued-far-past", "no-dump"
  std::string group, group_desc;
  std::vector<int> group_ranks;       ///< the group's members (names can be shared)
  std::int64_t seq = -1;              ///< the collective it is about; -1 for none
  Op op;                              ///< what seq was, when a buffer still holds it
  std::vector<int> ranks;             ///< whom it names
  std::map<int, State> states;        ///< at seq, every member with a dump
  std::vector<int> peers;             ///< gpu-stopped, queued-far-past: the peers ahead
  std::int64_t peers_completed = -1;  ///< queued-far-past: the furthest peer's completed
  std::string text;                   ///< the one line a user reads
  std::vector<int> causes, waiting;   ///< `ranks` split: causes, and ranks waiting elsewhere
  std::vector<int> in_flight;         ///< and ranks on their way (causes.h)
};

/// A rank that waits for peers: the oldest work (a collective, a send/recv) it queued and has
/// not completed, in the group where it is, and the members that have not got as far
/// (causes.h).
struct Wait {
  int rank = -1;
  std::string group, group_desc;
  std::vector<int> group_ranks;
  std::int64_t seq = -1;
  Op op;
  State state = State::scheduled;  ///< its own state at seq
  bool p2p = false;                ///< a send/recv: seq is its p2p_seq_id
  std::vector<int> for_ranks;      ///< members with a dump that have not got as far
  std::vector<int> for_no_dump;    ///< members without a dump: they may be why
};

struct GroupReport {
  std::string name, desc;
  std::vector<int> ranks;  ///< members: pg_config's, else the ranks whose dumps use the group
  bool ranks_from_config = false;
  bool shared_name = false;  ///< other groups have this name (split_group, DeviceMesh)
  bool carries_p2p = false;  ///< a member's buffer holds send/recv of it: pg_status unused
  std::vector<RankTrack> tracks;  ///< one per member, by rank
  std::vector<int> no_dump;
  std::vector<int> other_view;  ///< members whose own pg_config gives the name other members
  std::int64_t waits_at = -1;  ///< the first seq some member with a dump has not completed
  Op waits_op;
  std::map<int, State> waits_states;
};

struct Report {
  Inputs inputs;
  std::vector<GroupReport> groups;
  std::vector<Finding> findings;
  std::vector<int> ranks;  ///< every rank known: dumps, file names, pg_config
  std::vector<int> suspect_ranks;  ///< the causes: named, and waiting for nobody
  std::vector<int> waiting_ranks;  ///< seen waiting for a peer: never a cause
  std::vector<int> in_flight_ranks;  ///< named, but nobody holds the work they are in
  std::vector<int> no_dump_ranks;
  std::vector<Wait> waits;         ///< one per waiting rank
  std::vector<std::string> notes;  ///< job-wide: ranks on different versions, shared names
  /// 1 when a rank is suspect, else 0 (no readable dump at all is the CLI's usage error).
  int exit_code() const { return suspect_ranks.empty() ? 0 : 1; }
};

Report analyze(Inputs inputs, const Options& options);

/// "group 1 (mesh_tp)", or "group 1 [4,5] (mesh_tp)" where other groups share the name.
std::string group_label(const std::string& name, const std::string& desc,
                        const std::vector<int>& ranks, bool shared_name);
/// "0-3,7,9-10".
std::string rank_list(const std::vector<int>& ranks);
/// "seq 42 nccl:all_reduce [[1024]] Float", "seq 10 (gone from every ring buffer)".
std::string describe(std::int64_t seq, const Op& op);

}  // namespace gpudiag::fr
