// Rounds: see rounds.h. Every wait here is on an event in the store (a round
// opening, the job's end) with a parked WAIT of at most a second between
// looks, and ends when the job does: the end is written before the serving
// launcher's store goes, and a store that went away is the job's end too.
#include "launch/rounds.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "store/socket.h"
#include "store/tcp_store_client.h"
#include "util/deadline.h"
#include "util/error.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

constexpr const char* kRound = "rdzv/round";
constexpr const char* kEnded = "rdzv/ended";
constexpr const char* kWaiting = "rdzv/waiting";
constexpr int kMaxRound = 1 << 20;

Deadline rounds_call() { return Deadline::after(std::chrono::seconds(5)); }

void rounds_say(const std::string& message) {
  std::string line = "gpudiag launch: " + message + "\n";
  (void)!::write(2, line.data(), line.size());
}

/// rdzv/ended's "<status> <host>" read back as a stranger's text.
std::string ended_words(const std::string& text) {
  const auto space = text.find(' ');
  const std::string status = text.substr(0, std::min<std::size_t>(space, 4));
  const bool number = !status.empty() && std::all_of(status.begin(), status.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
  const std::string host =
      space == std::string::npos ? std::string("?") : clean_text(text.substr(space + 1, 64));
  if (!number) return "the job ended";
  return "the job ended with exit status " + status + " on " + host;
}

std::string faulty_line(const FaultyNode& f, int round, int nnodes, bool left_out) {
  return (left_out ? "excluding " : "not excluding ") + f.node.who() + " from round " +
         std::to_string(round) + ": " + f.why +
         (left_out ? "; the job goes on with " + std::to_string(nnodes) + " node(s)"
                   : "; leaving it out would leave fewer than --nnodes " +
                         std::to_string(f.node.min_nodes) + " nodes");
}

}  // namespace

Rounds::~Rounds() {
  if (!client_) return;
  try {
    if (!ended_published_) publish_end(last_status_ < 0 ? 2 : last_status_);
    if (!server_) return;
    // The serving launcher's store goes with it: first let the others read the
    // end (at most 15 s): the last round's members through with their attempt,
    // nobody meeting or waiting in Rounds::join.
    const int r = std::max(next_round_, 0);
    int size = 0;
    for (const auto& rec : history_)
      if (rec.round == r && rec.node_rank >= 0) size = rec.nnodes;
    const auto until = Deadline::after(std::chrono::seconds(15));
    auto count = [&](const std::string& key) { return client_->add(key, 0, until); };
    while (!until.expired() &&
           (count(prefix(r) + "done") < size || count(kWaiting) > 0))
      client_->wait({"rdzv/never"}, Deadline::after(std::chrono::milliseconds(50)));
  } catch (const std::exception&) {
  }
}

std::optional<std::string> Rounds::ended() {
  auto v = client_->try_get(kEnded, rounds_call());
  if (v) return v->substr(0, 128);
  return std::nullopt;
}

void Rounds::publish_end(int status) {
  ended_published_ = true;
  if (client_->add("rdzv/ended-claim", 1, rounds_call()) == 1)
    client_->set(kEnded, std::to_string(status) + " " + host_, rounds_call());
}

void Rounds::end_without(const std::string& ended_text, const std::string& why_waiting) {
  const int status = last_status_ < 0 ? 2 : last_status_;
  ended_published_ = true;  // the end is someone else's to say
  throw JobEndedWithout(ended_words(ended_text) + " (rdzv/ended at " + where_ + ") while " +
                            why_waiting + "; exit status " + std::to_string(status) +
                            (last_status_ < 0 ? " (this node ran no attempt)"
                                              : " (this node's last attempt)"),
                        status);
}

void Rounds::store_gone(const Error& e, const std::string& why_waiting) {
  const int status = last_status_ < 0 ? 2 : last_status_;
  throw JobEndedWithout("the rendezvous store at " + where_ + " went away (" + e.one_line() +
                            ": the launcher serving it ended) while " + why_waiting +
                            "; exit status " + std::to_string(status),
                        status);
}

void Rounds::wait_for_round(int r, const std::string& why_waiting) {
  for (;;) {
    std::optional<std::string> end;
    try {
      if (client_->add(kRound, 0, rounds_call()) >= r) return;
      end = ended();
      if (!end) client_->wait({prefix(r) + "open", kEnded}, Deadline::after(std::chrono::seconds(1)));
    } catch (const Error& e) {
      store_gone(e, why_waiting);
    }
    if (end) end_without(*end, why_waiting);
  }
}

void Rounds::connect(const JobInfo& job, const std::string& secret,
                     const std::function<std::unique_ptr<TcpStoreServer>(int)>& serve) {
  if (client_) return;
  where_ = net::host_port(job.master_addr, job.master_port);
  token_ = job.token;
  secret_ = secret;
  server_ = serve(job.master_port);
  port_ = server_ ? server_->port() : job.master_port;
  client_ = std::make_unique<TcpStoreClient>(server_ ? "127.0.0.1" : job.master_addr,
                                             port_, token_,
                                             Deadline::after_seconds(times_.join_timeout_s),
                                             secret_);
}

RoundOutcome Rounds::join(JobInfo& job, const NodeView& mine) {
  job.token = token_;
  job.master_port = port_;
  std::string waiting = "waiting for the next round";
  // Counted while in here (meeting or waiting), so the serving launcher keeps
  // its store until this one has read the job's end.
  try {
    client_->add(kWaiting, 1, rounds_call());
  } catch (const Error& e) {
    store_gone(e, waiting);
  }
  struct Leave {
    Store& s;
    ~Leave() {
      try {
        s.add(kWaiting, -1, Deadline::after(std::chrono::seconds(2)));
      } catch (const std::exception&) {
      }
    }
  } leave{*client_};
  // A launcher started again on a host the job left out twice (its node's
  // agent restarted it) stays out too: the count is the job's, in the store.
  const std::string excluded_key = "rdzv/excluded/" + clean_text(host_.substr(0, 64));
  // The job's count read (at the start, and as each round opens): twice out
  // is out for good, waiting for the job's end.
  auto stay_out_if_counted = [&] {
    try {
      if (client_->add(excluded_key, 0, rounds_call()) >= 2 && !stays_out_) {
        stays_out_ = true;
        rounds_say("this node was left out twice in this job already: it stays out and waits "
                   "for the job's end");
      }
    } catch (const Error& e) {
      store_gone(e, waiting);
    }
    if (stays_out_) wait_for_round(kMaxRound, "this node, left out twice, waited for the job's end");
  };
  if (!stays_out_ && history_.empty() && next_round_ < 0) stay_out_if_counted();
  if (stays_out_) wait_for_round(kMaxRound, "this node, left out twice, waited for the job's end");
  int r = next_round_ >= 0
              ? next_round_
              : static_cast<int>(std::clamp<std::int64_t>(client_->add(kRound, 0, rounds_call()),
                                                          0, kMaxRound - 1));
  for (;;) {
    wait_for_round(r, waiting);
    // Read again now that the round is open: every launcher of the round
    // before has counted the nodes it left out (count_left_out) by then.
    stay_out_if_counted();
    std::string fault = std::exchange(fault_, std::string());
    // --preflight: this node's check, now that the round is open.
    const std::string preflight = preflight_ ? preflight_(r) : std::string();
    if (!preflight.empty()) fault = preflight;
    RoundOutcome got;
    try {
      got = meet_round(*client_, mine, fault, times_, where_, prefix(r),
                       [this] { return ended().has_value(); });
    } catch (const Error& e) {
      if (server_) wait_for_acks(*client_, 3.0, prefix(r));
      try {  // a store that went away, after an attempt, is the job's end
        if (last_status_ >= 0) (void)ended();
      } catch (const Error&) {
        store_gone(e, waiting);
      }
      throw;
    }
    try {
      client_->add(prefix(r) + "acks", 1, Deadline::after(std::chrono::seconds(2)));
    } catch (const std::exception&) {
    }
    if (got.gave_up) end_without(ended().value_or(""), waiting);
    RoundRecord rec{r, got.nnodes, got.node_rank, got.late, got.left_out, got.kept, preflight};
    history_.push_back(rec);
    if (got.late) {
      rounds_say("the rendezvous at " + where_ + " round " + std::to_string(r) + " " +
                 got.late_why + "; this node waits for the next round (one opens when the job "
                 "restarts after a failure) or the job's end");
      waiting = "waiting, late, for the next round";
      r = std::min(r + 1, kMaxRound - 1);
      continue;
    }
    for (const auto& f : got.left_out) {
      rounds_say(faulty_line(f, r, got.nnodes, true));
      count_left_out(r, f.node.host);
    }
    for (const auto& f : got.kept) rounds_say(faulty_line(f, r, got.nnodes, false));
    if (!got.admitted) {
      const auto times = client_->add(excluded_key, 0, rounds_call());  // counted above
      stays_out_ = times >= 2;
      waiting = "this node was left out of round " + std::to_string(r) + " (" + fault + ")";
      rounds_say(stays_out_ ? "this node was left out twice in this job: it stays out and waits "
                              "for the job's end"
                            : "this node is left out of round " + std::to_string(r) +
                                  "; it waits for the next round or the job's end");
      r = stays_out_ ? kMaxRound : std::min(r + 1, kMaxRound - 1);
      continue;
    }
    next_round_ = r;
    job.node_rank = got.node_rank;
    job.nnodes = got.nnodes;
    job.restart_count = r;
    return got;
  }
}

/// Every launcher of the round counts each node it left out, once a round
/// (the first to get here does), so the job's count is there as soon as
/// any launcher is through the round: one started again on that node reads
/// it even when the launcher left out never got to count itself.
void Rounds::count_left_out(int round, const std::string& host) {
  const std::string h = clean_text(host.substr(0, 64));
  try {
    if (client_->add(prefix(round) + "left-out/" + h, 1, rounds_call()) == 1)
      client_->add("rdzv/excluded/" + h, 1, rounds_call());
  } catch (const Error& e) {
    spdlog::warn("launch: could not count {} as left out of round {}: {}", h, round, e.one_line());
  }
}

void Rounds::after_attempt(const AttemptEnd& end, const std::string& fault) {
  if (!client_) return;
  last_status_ = end.exit_status;
  const int r = std::max(next_round_, 0);
  try {
    client_->add(prefix(r) + "done", 1, rounds_call());
    if (end.then != AfterAttempt::restart) {
      publish_end(end.exit_status);
      return;
    }
    fault_ = fault;
    if (client_->add(prefix(r) + "reopen", 1, rounds_call()) == 1) {
      client_->add(kRound, 1, rounds_call());
      client_->set(prefix(r + 1) + "open", "1", rounds_call());
    }
    next_round_ = std::min(r + 1, kMaxRound - 1);
  } catch (const Error&) {
    next_round_ = std::min(r + 1, kMaxRound - 1);  // the next join says what is wrong
  }
}

}  // namespace gpudiag::launch
