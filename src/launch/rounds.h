// The rounds of a job's rendezvous across its attempts, as torchrun's elastic
// agent has them: one Rounds per launcher process, kept across attempts, so
// the store that hosts the rendezvous (served by the launcher whose host is
// the endpoint's and that bound its port first) lives as long as that
// launcher, not as long as one attempt.
//
// Keys, in the job's store:
//   rdzv/round          the round now open (ADD; 0 first)
//   rdzv/<R>/open       set when round R opens (a parked WAIT wakes on it)
//   rdzv/<R>/...        round R's meeting (round_meeting.h)
//   rdzv/<R>/reopen     ADD: the first launcher of round R to restart opens R+1
//   rdzv/<R>/done       ADD: round R's launchers through with their attempt
//   rdzv/ended          "<status> <host>": the job ended (its first launcher
//                       not to restart wrote it); nobody opens another round
//   rdzv/waiting        ADD: launchers meeting or waiting for a round; the serving one
//                       lets them read rdzv/ended before its store goes
//   rdzv/excluded/<h>   ADD: how often host h was left out (twice: it stays out,
//                       and so does a launcher started again on h)
//
// A launcher that arrives after its round closed, or that the round left
// out, waits for the next round (it opens when the job restarts after a
// failure) or for the job's end; at the end it throws JobEndedWithout, with
// the status it exits with: 2 when it never ran an attempt, else its last
// attempt's. TORCHELASTIC_RESTART_COUNT of an attempt is its round, the same
// on every node.
//
// Under --preflight (preflight.h) a launcher checks its node once a round
// opened and before it arrives there; a failed check is its node's fault in
// that round, as a rank's SIGBUS in the attempt before would be.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/job.h"
#include "launch/restart_policy.h"
#include "launch/round_meeting.h"
#include "store/store.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag::launch {

/// The job ended while this launcher was not running in a round.
class JobEndedWithout : public std::runtime_error {
 public:
  JobEndedWithout(const std::string& what, int status)
      : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

/// One round as this launcher saw it (launch --json's `rounds`).
struct RoundRecord {
  int round = 0;
  int nnodes = 0;
  int node_rank = -1;  ///< -1: not admitted (late, or left out)
  bool late = false;
  std::vector<FaultyNode> left_out, kept;
  /// --preflight: this node's fault found before the round ("" none or not run).
  std::string preflight;
};

class Rounds {
 public:
  Rounds(std::string host, RendezvousTimes times) : host_(std::move(host)), times_(times) {}
  ~Rounds();
  Rounds(const Rounds&) = delete;
  Rounds& operator=(const Rounds&) = delete;

  /// The first time only: `serve(port)` may return a server for the endpoint
  /// (null: another launcher serves it), then a client connects with the
  /// job's token and `secret`, both kept for every later attempt.
  void connect(const JobInfo& job, const std::string& secret,
               const std::function<std::unique_ptr<TcpStoreServer>(int)>& serve);
  /// Meets the others in the next round, waiting through rounds that close
  /// without this node. Settles job.node_rank, job.nnodes, job.restart_count
  /// (the round) and job.token. Throws JobEndedWithout, UsageError,
  /// TimeoutError.
  RoundOutcome join(JobInfo& job, const NodeView& mine);
  /// --preflight (preflight.h): asked before every round this launcher meets
  /// in (after the round opened, before it arrives); a non-empty answer is
  /// this node's fault in that round, in place of the last attempt's.
  void set_preflight(std::function<std::string(int round)> preflight) {
    preflight_ = std::move(preflight);
  }
  /// After an attempt: a restart opens the next round (`fault`: why this node
  /// is at fault, "" not); any other end says the job ended.
  void after_attempt(const AttemptEnd& end, const std::string& fault);

  Store* store() { return client_.get(); }
  bool serving() const { return server_ != nullptr; }
  bool connected() const { return client_ != nullptr; }
  int port() const { return port_; }
  const std::string& secret() const { return secret_; }
  const std::vector<RoundRecord>& history() const { return history_; }
  /// The round this launcher last ran in (the next one after a restart).
  int round() const { return std::max(next_round_, 0); }

 private:
  std::string prefix(int round) const { return "rdzv/" + std::to_string(round) + "/"; }
  /// The job's end as another launcher wrote it, if it did.
  std::optional<std::string> ended();
  /// Waits until round `r` opens; throws JobEndedWithout when the job ends first.
  void wait_for_round(int r, const std::string& why_waiting);
  [[noreturn]] void store_gone(const Error& e, const std::string& why_waiting);
  [[noreturn]] void end_without(const std::string& ended_text, const std::string& why_waiting);
  void publish_end(int status);
  /// Counts `host` as left out of `round` in the job's store, once a round.
  void count_left_out(int round, const std::string& host);

  std::string host_;
  RendezvousTimes times_;
  std::string where_, token_, secret_;
  int port_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> client_;
  int next_round_ = -1;   ///< the round to join next (-1: the one open now)
  int last_status_ = -1;  ///< the last attempt's exit status (-1: none ran)
  std::string fault_;     ///< this node's fault in the last attempt
  bool stays_out_ = false;
  bool ended_published_ = false;
  std::vector<RoundRecord> history_;
  std::function<std::string(int)> preflight_;
};

}  // namespace gpudiag::launch
