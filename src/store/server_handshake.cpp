// The handshake half of ServerCore (server_conn.h): HELLO, the job secret's
// challenge and answer, refusals, and what a connection's rank claim means
// to the store: ownership of that rank's keys (key_owners.h), and, for ranks
// started by hand, the death of a rank whose connection closes without its
// goodbye, announced as a launcher would.
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>

#include "store/server_conn.h"

namespace gpudiag {

namespace sw = storewire;

std::string ServerCore::who(const Conn& c) {
  return "client " + c.peer +
         (c.rank == sw::kNoRank ? std::string()
                                : " (claiming rank " + std::to_string(c.rank) + ")");
}

void ServerCore::refuse_hello(Conn& c, std::uint32_t id, sw::ErrorCode code,
                              const std::string& message) {
  ++dropped_;  // before the reply goes out, so a client that reads it sees the count
  reply(c, error_frame(id, code, message));
  c.closing = true;
  flush(c);
}

void ServerCore::hello(Conn& c, const sw::Frame& f) {
  if (c.challenged) return auth(c, f);
  if (f.type != sw::Type::hello) throw sw::ProtocolError("first message is not a handshake");
  sw::Reader r(f.payload);
  auto version = r.u16();
  auto token = r.str();
  // A client of before the job secret ends here: it asks for no authentication.
  // Later versions may append fields: not checked for trailing bytes.
  auto mode = sw::Auth::none;
  if (!r.done()) {
    mode = static_cast<sw::Auth>(r.u8());
    c.rank = r.u32();
    c.client_nonce = r.str();
  }
  const bool has_secret = !opts_.secret.empty();
  if (version != sw::kVersion) {
    if (log_budget())
      spdlog::warn("store: rejecting client {}: it speaks store protocol v{}, this server v{}",
                   c.peer, version, sw::kVersion);
    return refuse_hello(c, f.id, sw::ErrorCode::version_mismatch,
                        "the store speaks protocol version " + std::to_string(sw::kVersion) +
                            ", the client " + std::to_string(version));
  }
  if (token != opts_.token) {
    if (log_budget())
      spdlog::warn("store: rejecting {}: wrong job token (a rank of another job?)", who(c));
    return refuse_hello(c, f.id, sw::ErrorCode::token_mismatch,
                        "this store belongs to another job (token mismatch)");
  }
  if (has_secret && mode != sw::Auth::hmac_sha256) {
    if (log_budget())
      spdlog::warn("store: rejecting {}: it has no job secret and this store requires one", who(c));
    return refuse_hello(c, f.id, sw::ErrorCode::secret_refused,
                        "the store requires the job's secret and this rank has none");
  }
  if (!has_secret && mode != sw::Auth::none) {
    if (log_budget())
      spdlog::warn("store: rejecting {}: it has a job secret and this store has none", who(c));
    return refuse_hello(c, f.id, sw::ErrorCode::secret_refused,
                        "the store has no job secret and this rank has one");
  }
  if (c.refused) {
    ++refused_;
    return refuse_hello(c, f.id, sw::ErrorCode::overloaded,
                        "it holds all the connections it may (" + overloaded_why() + ")");
  }
  if (!has_secret && sw::is_tree_claim(c.rank) && !c.job_peer && c.peer_socket &&
      c.peer_socket->uid != static_cast<std::uint32_t>(::geteuid())) {
    // A judge's place, claimed from this host by another user's process: no
    // judge of this job runs there (the job's processes are this user's, or
    // proved the secret). Without a secret an outsider would own the place
    // and write its deaths and parts.
    if (log_budget())
      spdlog::warn("store: rejecting {}: it claims a judge's place from a process of uid {}, "
                   "not of this job", who(c), c.peer_socket->uid);
    return refuse_hello(c, f.id, sw::ErrorCode::secret_refused,
                        "a judge's place is claimed only by the job's own processes (this "
                        "connection is uid " + std::to_string(c.peer_socket->uid) +
                            "'s): give the job a secret (GPUDIAG_SECRET) to meet across users");
  }
  if (has_secret) {
    if (c.client_nonce.size() != sw::kNonceBytes)
      throw sw::ProtocolError("a handshake nonce of " + std::to_string(c.client_nonce.size()) +
                              " bytes");
    c.server_nonce = sw::random_nonce();
    c.challenged = true;
    reply(c, sw::Writer(sw::Type::challenge, f.id).str(c.server_nonce).finish());
    return;
  }
  greet(c);
  reply(c, sw::Writer(sw::Type::hello_ok, f.id).u16(sw::kVersion).finish());
}

void ServerCore::announce_if_lost(const Conn& c) {
  if (!opts_.deaths_from_connections || !c.greeted || !owners_.is_owner(c.id, c.rank)) return;
  const std::string r = std::to_string(c.rank);
  if (state_.find("bye/" + r) || state_.find("dead/" + r)) return;
  // Said as a launcher says it, "rank 2 [node1-2] (pid 42) ...", from the
  // rank's hello "pid 42 on node1 (local rank 2)" when it parses.
  std::string who = "rank " + r;
  if (const std::string* hello = state_.find("hello/" + r)) {
    unsigned long long pid = 0;
    int local = 0;
    char host[256] = {};
    if (std::sscanf(hello->c_str(), "pid %llu on %255s (local rank %d)", &pid, host, &local) == 3)
      who += " [" + storelimits::store_text(host, 128) + "-" + std::to_string(local) + "] (pid " +
             std::to_string(pid) + ")";
  }
  const std::string* phase = state_.find("phase/" + r);
  const std::string why =
      who + " closed its connection to the store " +
      (phase ? "in its " + storelimits::store_text(*phase, 64) + " phase" : "before its first phase") +
      ": its process died, was killed or exited early" +
      (opts_.served_by.empty() ? "" : " (seen by the store, served by " + opts_.served_by + ")");
  spdlog::info("store: {}", why);
  std::vector<StoreState::WaiterId> woken;
  state_.set("dead/" + r, "1", woken);  // before the announcement, as a launcher does
  if (auto n = state_.add("failures", 1, woken))
    state_.set("failure/" + std::to_string(*n), "died\t" + why, woken);
  wake(woken);
}

void ServerCore::greet(Conn& c) {
  c.greeted = true;
  if (!opts_.secret.empty() && !c.outsider.empty()) {
    // It proved the job secret: the job's, whatever its address; its place
    // among its peer's few outsider connections is free again.
    if (auto it = outsiders_open_.find(c.outsider); it != outsiders_open_.end() && --it->second <= 0)
      outsiders_open_.erase(it);
    c.outsider.clear();
    c.job_peer = true;
  }
  auto duplicates = owners_.greeted(c.id, c.rank, c.peer);
  if (!duplicates) return;
  if (log_budget())
    spdlog::warn("store: {} claims a rank another connection holds: it may not write that "
                 "rank's records (a duplicate RANK, or a process posing as it)",
                 who(c));
  std::vector<StoreState::WaiterId> woken;
  state_.set("duplicates", std::move(*duplicates), woken);
  wake(woken);
}

void ServerCore::auth(Conn& c, const sw::Frame& f) {
  if (f.type != sw::Type::auth) throw sw::ProtocolError("no answer to the handshake's challenge");
  sw::Reader r(f.payload);
  auto answer = r.str();
  r.expect_done();
  auto expected =
      sw::client_proof(opts_.secret, c.server_nonce, c.client_nonce, opts_.token, c.rank);
  if (!sw::proofs_equal(answer, expected)) {
    if (log_budget())
      spdlog::warn(
          "store: rejecting {}: it does not know the job's secret (a rank of another job with "
          "the same token, or a process outside the job)",
          who(c));
    return refuse_hello(c, f.id, sw::ErrorCode::secret_refused,
                        "this rank's proof of the job secret is wrong");
  }
  greet(c);
  c.challenged = false;
  auto mine = sw::server_proof(opts_.secret, c.server_nonce, c.client_nonce, opts_.token, c.rank);
  reply(c, sw::Writer(sw::Type::hello_ok, f.id).u16(sw::kVersion).str(mine).finish());
}

}  // namespace gpudiag
