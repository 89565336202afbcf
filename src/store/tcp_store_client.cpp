#include "store/tcp_store_client.h"

#include <thread>

#include "store/peer_identity.h"
#include "store/store_limits.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace sw = storewire;

namespace {

/// "'a', 'b'" (at most 8 named, then "and N more").
std::string key_list(const std::vector<std::string>& keys) {
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < 8; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 8) out += " and " + std::to_string(keys.size() - 8) + " more";
  return out;
}

const char* const kStuckRemedy =
    "the rank expected to set it is late, stuck or dead; raise --timeout if it is only slow";
const char* const kServerRemedy =
    "the process serving the store (rank 0 or `gpudiag launch`) may be overloaded or hung";

}  // namespace

const char* const kSecretRemedy = "ranks of one job must share GPUDIAG_SECRET or --secret-file";

TcpStoreClient::TcpStoreClient(std::string host, int port, std::string token, Deadline deadline,
                               std::string secret, std::uint32_t rank,
                               std::optional<Deadline> refused_by)
    : host_(std::move(host)),
      port_(port),
      token_(std::move(token)),
      secret_(std::move(secret)),
      rank_(rank),
      address_(net::host_port(host_, port_)) {
  if (token_.size() > storelimits::kMaxTokenBytes)
    throw UsageError("the job token is " + std::to_string(token_.size()) +
                         " bytes long; the store takes at most " +
                         std::to_string(storelimits::kMaxTokenBytes),
                     "set a shorter GPUDIAG_TOKEN");
  connect(deadline, refused_by);
}

void TcpStoreClient::secret_refused(const std::string& why) {
  fd_.reset();
  in_.clear();
  throw UsageError("the store at " + address_ +
                   " refused this rank's job secret: " + kSecretRemedy + " (" + why + ")");
}

net::Io TcpStoreClient::read_hello_frame(sw::Frame& f, Deadline deadline) {
  auto io = net::Io::ok;
  try {
    while (io == net::Io::ok && !sw::next_frame(in_, f, storelimits::kMaxHelloFrame))
      io = net::recv_some(fd_.get(), in_, deadline);
  } catch (const sw::ProtocolError&) {
    throw UsageError("the server at " + address_ + " does not speak gpudiag's store protocol",
                     "check MASTER_PORT: under torchrun it is the agent's torch store");
  }
  return io;
}

net::Io TcpStoreClient::finish_handshake(sw::Frame& f, const std::string& client_nonce,
                                         Deadline deadline, bool& joined) {
  joined = false;
  if (f.type == sw::Type::challenge) {
    std::string server_nonce;
    try {
      sw::Reader r(f.payload);
      server_nonce = r.str();
      r.expect_done();
    } catch (const sw::ProtocolError& e) {
      malformed(std::string("a handshake challenge that does not parse (") + e.what() + ")");
    }
    in_.erase(0, f.total);
    if (secret_.empty())
      secret_refused("the store requires the job's secret and this rank has none");
    if (server_nonce.size() != sw::kNonceBytes) malformed("a handshake nonce of the wrong size");
    auto answer = sw::Writer(sw::Type::auth, 0)
                      .str(sw::client_proof(secret_, server_nonce, client_nonce, token_, rank_))
                      .finish();
    auto io = net::send_all(fd_.get(), answer.data(), answer.size(), deadline);
    if (io == net::Io::ok) io = read_hello_frame(f, deadline);
    if (io != net::Io::ok) return io;  // the caller reports the timeout or close
    if (f.type == sw::Type::hello_ok) {
      std::string proof;
      try {
        sw::Reader r(f.payload);
        r.u16();
        proof = r.str();
      } catch (const sw::ProtocolError&) {
      }
      in_.erase(0, f.total);
      if (!sw::proofs_equal(proof,
                            sw::server_proof(secret_, server_nonce, client_nonce, token_, rank_)))
        secret_refused(
            "the store did not prove it knows the job's secret: another job's "
            "store, or a process posing as it");
      joined = true;
    }
    return io;  // an ERROR (or another frame) is left in `f` for the caller
  }
  if (f.type == sw::Type::hello_ok) {
    in_.erase(0, f.total);
    if (!secret_.empty())
      secret_refused(
          "the store did not ask for it: it has no job secret, or is a process "
          "posing as the job's store");
    joined = true;
  }
  return net::Io::ok;
}

void TcpStoreClient::connect(Deadline deadline, std::optional<Deadline> refused_by) {
  const auto start = Deadline::Clock::now();
  while (true) {
    fd_ = net::connect_with_retry(host_, port_, deadline, refused_by);
    in_.clear();
    const std::string client_nonce = secret_.empty() ? std::string() : sw::random_nonce();
    std::string hello(sw::kMagic);
    hello +=
        sw::Writer(sw::Type::hello, 0)
            .u16(sw::kVersion)
            .str(token_)
            .u8(static_cast<std::uint8_t>(secret_.empty() ? sw::Auth::none : sw::Auth::hmac_sha256))
            .u32(rank_)
            .str(client_nonce)
            .finish();
    auto io = net::send_all(fd_.get(), hello.data(), hello.size(), deadline);
    sw::Frame f{};
    if (io == net::Io::ok) io = read_hello_frame(f, deadline);
    bool joined = false;
    if (io == net::Io::ok) io = finish_handshake(f, client_nonce, deadline, joined);
    if (joined) return;
    if (io == net::Io::timeout)
      throw TimeoutError("the server at " + address_ +
                             " accepted the connection but did not answer gpudiag's handshake "
                             "within " +
                             human_seconds(seconds_since(start)),
                         "check that MASTER_PORT is the port of gpudiag's store (under torchrun "
                         "it is the agent's torch store) and that its process is not hung");
    if (io == net::Io::closed) {
      // The server closed on us while starting or stopping: try again until the deadline.
      fd_.reset();
      if (deadline.expired())
        throw TimeoutError("the server at " + address_ + " closed every connection during the " +
                               "handshake for " + human_seconds(seconds_since(start)),
                           "check that MASTER_PORT is the port of gpudiag's store (under torchrun "
                           "it is the agent's torch store) and that its process is healthy");
      std::this_thread::sleep_for(std::min(std::chrono::milliseconds(100), deadline.remaining()));
      continue;
    }
    if (f.type == sw::Type::error) {
      std::string payload(f.payload);
      fd_.reset();
      // A store holding all the connections it may: one may free up (a half-open
      // one times out), so try again until the deadline, then say why.
      if (!payload.empty() && payload[0] == char(sw::ErrorCode::overloaded) &&
          deadline.remaining() > std::chrono::milliseconds(500)) {
        std::this_thread::sleep_for(std::min(std::chrono::milliseconds(200), deadline.remaining()));
        continue;
      }
      server_error(payload);
    }
    throw UsageError("the server at " + address_ + " does not speak gpudiag's store protocol");
  }
}

void TcpStoreClient::lost() {
  fd_.reset();
  in_.clear();
  throw Error(ExitCode::broken,
              "lost the store at " + address_ +
                  ": the process serving it (rank 0 or the launcher) exited or hung",
              "look at the output of rank 0 or `gpudiag launch` for why it stopped");
}

void TcpStoreClient::malformed(const std::string& what) {
  fd_.reset();
  in_.clear();
  throw Error(ExitCode::broken, "malformed reply from the store at " + address_ + ": " + what,
              "check MASTER_ADDR/MASTER_PORT: the process there may not be this job's store");
}

void TcpStoreClient::server_error(const std::string& payload) {
  sw::ErrorCode code{};
  std::string message;
  try {
    sw::Reader r(payload);
    code = static_cast<sw::ErrorCode>(r.u8());
    message = storelimits::store_text(r.str(), 512);
  } catch (const sw::ProtocolError& e) {
    malformed(std::string("an error reply that does not parse (") + e.what() + ")");
  }
  switch (code) {
    case sw::ErrorCode::token_mismatch:
      throw UsageError("the store at " + address_ + " belongs to another job (token mismatch)",
                       "check GPUDIAG_TOKEN / that MASTER_PORT is not shared between jobs");
    case sw::ErrorCode::secret_refused:
      secret_refused(message);
    case sw::ErrorCode::version_mismatch:
      throw UsageError("the store at " + address_ + ": " + message,
                       "run the same gpudiag version on every node");
    case sw::ErrorCode::overloaded:
      throw Error(ExitCode::broken, "the store at " + address_ + " refused this rank: " + message,
                  "raise `ulimit -n` where the store runs (rank 0 or `gpudiag launch`), and look "
                  "for other processes connecting to MASTER_PORT");
    case sw::ErrorCode::over_limit:
      throw Error(ExitCode::broken, "the store at " + address_ + " refused a request: " + message);
    default:
      throw Error(ExitCode::usage, "the store at " + address_ + " refused a request: " + message);
  }
}

std::optional<bool> TcpStoreClient::server_running() {
  if (!fd_) return std::nullopt;
  const auto sock = net::local_peer_socket(fd_.get());
  if (!sock) return std::nullopt;  // another host's, or already closed
  if (net::held_by_process(::getpid(), sock->inode)) return true;  // served in this process
  const auto pid = net::holder_of(sock->inode);
  if (!pid) return std::nullopt;
  const char state = net::process_state(*pid);
  return state != 0 && state != 'T' && state != 't' && state != 'Z' && state != 'X';
}

std::optional<TcpStoreClient::Reply> TcpStoreClient::call(sw::Writer request, std::uint32_t id,
                                                          Deadline deadline) {
  if (!fd_) connect(deadline);  // an earlier send timed out midway and closed it
  auto frame = std::move(request).finish();
  auto io = net::send_all(fd_.get(), frame.data(), frame.size(), deadline);
  if (io == net::Io::closed) lost();
  if (io == net::Io::timeout) {
    fd_.reset();  // a partial frame went out: this connection cannot be reused
    return std::nullopt;
  }
  while (true) {
    sw::Frame f{};
    bool complete = false;
    try {
      complete = sw::next_frame(in_, f, storelimits::kMaxReplyFrame);
    } catch (const sw::ProtocolError& e) {
      malformed(e.what());
    }
    if (complete) {
      Reply reply{f.type, std::string(f.payload)};
      bool mine = f.id == id;
      in_.erase(0, f.total);
      if (mine) return reply;
      continue;  // a late answer to a request this client gave up on
    }
    io = net::recv_some(fd_.get(), in_, deadline);
    if (io == net::Io::closed) lost();
    if (io == net::Io::timeout) {
      auto cancel = sw::Writer(sw::Type::cancel, 0).u32(id).finish();
      net::send_all(fd_.get(), cancel.data(), cancel.size(),
                    Deadline::after(std::chrono::milliseconds(200)));
      return std::nullopt;
    }
  }
}

TcpStoreClient::Reply TcpStoreClient::call_or_throw(sw::Writer request, std::uint32_t id,
                                                    Deadline deadline, const std::string& what) {
  const auto start = Deadline::Clock::now();
  auto reply = call(std::move(request), id, deadline);
  if (!reply)
    throw TimeoutError("the store at " + address_ + " did not answer " + what + " within " +
                           human_seconds(seconds_since(start)),
                       kServerRemedy);
  if (reply->type == sw::Type::error) server_error(reply->payload);
  return std::move(*reply);
}

void TcpStoreClient::set(const std::string& key, const std::string& value, Deadline deadline) {
  if (value.size() > storelimits::kMaxValueBytes)
    throw Error(ExitCode::internal, "store key '" + key + "': a value of " +
                                        std::to_string(value.size()) +
                                        " bytes exceeds the store's " + "limit of " +
                                        std::to_string(storelimits::kMaxValueBytes));
  std::lock_guard lock(mu_);
  auto id = next_id_++;
  auto reply = call_or_throw(std::move(sw::Writer(sw::Type::set, id).str(key).str(value)), id,
                             deadline, "SET '" + key + "'");
  decode(reply, sw::Type::ok, [](sw::Reader&) { return true; });
}

std::string TcpStoreClient::get(const std::string& key, Deadline deadline) {
  std::lock_guard lock(mu_);
  const auto start = Deadline::Clock::now();
  auto id = next_id_++;
  auto reply = call(std::move(sw::Writer(sw::Type::get, id).str(key)), id, deadline);
  if (!reply)
    throw TimeoutError("timed out after " + human_seconds(seconds_since(start)) +
                           " waiting for store key '" + key + "' at " + address_,
                       kStuckRemedy);
  if (reply->type == sw::Type::error) server_error(reply->payload);
  return decode(*reply, sw::Type::value, [](sw::Reader& r) { return r.str(); });
}

std::optional<std::string> TcpStoreClient::try_get(const std::string& key, Deadline deadline) {
  std::lock_guard lock(mu_);
  auto id = next_id_++;
  auto reply = call_or_throw(std::move(sw::Writer(sw::Type::try_get, id).str(key)), id, deadline,
                             "TRY_GET '" + key + "'");
  if (reply.type == sw::Type::not_found) return std::nullopt;
  return decode(reply, sw::Type::value, [](sw::Reader& r) { return r.str(); });
}

std::int64_t TcpStoreClient::add(const std::string& key, std::int64_t delta, Deadline deadline) {
  std::lock_guard lock(mu_);
  auto id = next_id_++;
  auto reply = call_or_throw(std::move(sw::Writer(sw::Type::add, id).str(key).i64(delta)), id,
                             deadline, "ADD '" + key + "'");
  return decode(reply, sw::Type::integer, [](sw::Reader& r) { return r.i64(); });
}

bool TcpStoreClient::wait(const std::vector<std::string>& keys, Deadline deadline) {
  std::lock_guard lock(mu_);
  auto id = next_id_++;
  auto reply = call(std::move(sw::Writer(sw::Type::wait, id).strs(keys)), id, deadline);
  if (!reply) return false;
  if (reply->type == sw::Type::error) server_error(reply->payload);
  return decode(*reply, sw::Type::ok, [](sw::Reader&) { return true; });
}

std::vector<std::optional<std::string>> TcpStoreClient::multi_get(
    const std::vector<std::string>& keys, Deadline deadline) {
  std::lock_guard lock(mu_);
  auto id = next_id_++;
  auto reply = call_or_throw(std::move(sw::Writer(sw::Type::multi_get, id).strs(keys)), id,
                             deadline, "MULTI_GET " + key_list(keys));
  return decode(reply, sw::Type::values,
                [&](sw::Reader& r) { return sw::read_values(r, keys.size()); });
}

}  // namespace gpudiag
