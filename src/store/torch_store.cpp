#include "store/torch_store.h"

#include "store/store_limits.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;
constexpr std::uint8_t kValidate = 0;
/// A value longer than any gpudiag stores: a key set by someone else, or a
/// stream out of sync. Refused before anything is allocated for it.
constexpr std::uint64_t kMaxValue = storelimits::kMaxValueBytes;

constexpr TorchStoreClient::Dialect kLegacy = TorchStoreClient::Dialect::legacy;

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}
std::uint64_t get_u64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string validate_message() {
  std::string m(1, static_cast<char>(kValidate));
  for (int i = 0; i < 4; ++i) m.push_back(static_cast<char>((kValidationMagic >> (8 * i)) & 0xff));
  return m;
}

}  // namespace

TorchStoreClient::TorchStoreClient(std::string host, int port, std::string prefix,
                                   Deadline deadline)
    : host_(std::move(host)),
      port_(port),
      prefix_(std::move(prefix)),
      address_(net::host_port(host_, port_)) {
  dialect_ = detect(deadline);
  ensure_connected(deadline);
}

const TorchStoreClient::Codes& TorchStoreClient::codes() const {
  static const Codes legacy{0, 2, 3, 4, 5, 6, -1};
  static const Codes validated{1, 3, 4, 5, 6, 7, 12};
  return dialect_ == kLegacy ? legacy : validated;
}

TorchStoreClient::Dialect TorchStoreClient::detect(Deadline deadline) {
  fd_ = net::connect_with_retry(host_, port_, deadline);
  // Validated: VALIDATE, GETNUMKEYS(7) x2, CHECK(5) of 128 empty keys -> 8 + 8 + 1 bytes.
  // Legacy: SET(0) with key length 0x80050707'3C85F7CE -> the server drops us.
  std::string probe = validate_message();
  probe += "\x07\x07\x05";
  put_u64(probe, 128);
  for (int i = 0; i < 128; ++i) put_u64(probe, 0);
  auto probe_deadline = deadline.min(Deadline::after(std::chrono::seconds(10)));
  unsigned char reply[17];
  auto io = net::send_all(fd_.get(), probe.data(), probe.size(), probe_deadline);
  if (io == net::Io::ok) io = net::recv_exact(fd_.get(), reply, sizeof reply, probe_deadline);
  if (io == net::Io::ok) return Dialect::validated;  // this connection is validated: keep it
  fd_.reset();
  if (io == net::Io::closed) {
    // Legacy, or no TCPStore at all (gpudiag's own store drops both): a legacy
    // GETNUMKEYS on a fresh connection tells them apart.
    fd_ = net::connect_with_retry(host_, port_, deadline);
    unsigned char count[8];
    io = net::send_all(fd_.get(), "\x06", 1, probe_deadline);
    if (io == net::Io::ok) io = net::recv_exact(fd_.get(), count, sizeof count, probe_deadline);
    if (io == net::Io::ok) return kLegacy;  // keep this connection
    fd_.reset();
    if (io == net::Io::closed)
      throw UsageError("the server at " + address_ + " is not a torch TCPStore",
                       "outside torchrun MASTER_PORT is the port of gpudiag's own store; under "
                       "torchrun check that MASTER_ADDR/MASTER_PORT are the agent's");
  }
  throw TimeoutError("the server at " + address_ +
                         " accepted the connection but answered neither dialect of torch's "
                         "TCPStore protocol",
                     "check MASTER_PORT: outside torchrun it is gpudiag's own store");
}

void TorchStoreClient::ensure_connected(Deadline deadline) {
  if (fd_) return;
  fd_ = net::connect_with_retry(host_, port_, deadline);
  if (dialect_ == Dialect::validated) send(validate_message(), deadline, "the handshake");
}

void TorchStoreClient::lost() {
  fd_.reset();
  throw Error(ExitCode::broken,
              "lost the store at " + address_ +
                  ": the process serving it (the torchrun agent or rank 0) exited or hung",
              "look at the torchrun agent's output for why it stopped");
}

void TorchStoreClient::send(const std::string& bytes, Deadline deadline, const std::string& what) {
  auto io = net::send_all(fd_.get(), bytes.data(), bytes.size(), deadline);
  if (io == net::Io::closed) lost();
  if (io == net::Io::timeout) {
    fd_.reset();
    throw TimeoutError("the torch store at " + address_ + " did not take " + what + " in time",
                       "the torchrun agent serving the store may be overloaded or hung");
  }
}

void TorchStoreClient::recv(void* out, std::size_t n, Deadline deadline, const std::string& what) {
  auto io = net::recv_exact(fd_.get(), out, n, deadline);
  if (io == net::Io::closed) lost();
  if (io == net::Io::timeout) {
    fd_.reset();  // a reply may still come: this connection is out of sync
    throw TimeoutError("the torch store at " + address_ + " did not answer " + what + " in time",
                       "the torchrun agent serving the store may be overloaded or hung");
  }
}

std::string TorchStoreClient::recv_string(Deadline deadline, const std::string& what) {
  unsigned char len[8];
  recv(len, sizeof len, deadline, what);
  auto n = get_u64(len);
  if (n > kMaxValue) {
    fd_.reset();  // the rest of that value is still on its way: out of sync
    throw Error(ExitCode::broken,
                "the torch store at " + address_ + " answered " + what + " with a " +
                    std::to_string(n) + "-byte value, more than gpudiag ever stores (" +
                    std::to_string(kMaxValue) + ")",
                "another process may have written gpudiag's keys in the torchrun agent's store "
                "(it has no authentication); rerun the job");
  }
  std::string value(n, '\0');
  if (n) recv(value.data(), n, deadline, what);
  return value;
}

void TorchStoreClient::set(const std::string& key, const std::string& value, Deadline deadline) {
  std::lock_guard lock(mu_);
  ensure_connected(deadline);
  // SET has no reply; GETNUMKEYS after it confirms the server applied it.
  std::string q(1, static_cast<char>(codes().set));
  put_string(q, prefix_ + key);
  put_string(q, value);
  q.push_back(static_cast<char>(codes().num_keys));
  send(q, deadline, "SET '" + key + "'");
  unsigned char n[8];
  recv(n, sizeof n, deadline, "SET '" + key + "'");
}

std::string TorchStoreClient::get(const std::string& key, Deadline deadline) {
  const auto start = Deadline::Clock::now();
  if (!wait({key}, deadline))
    throw TimeoutError("timed out after " + human_seconds(seconds_since(start)) +
                           " waiting for store key '" + key + "' at " + address_,
                       "the rank expected to set it is late, stuck or dead; raise --timeout if "
                       "it is only slow");
  std::lock_guard lock(mu_);
  ensure_connected(deadline);
  std::string q(1, static_cast<char>(codes().get));
  put_string(q, prefix_ + key);
  send(q, deadline, "GET '" + key + "'");
  return recv_string(deadline, "GET '" + key + "'");
}

std::optional<std::string> TorchStoreClient::try_get(const std::string& key, Deadline deadline) {
  auto v = multi_get({key}, deadline);
  return v.front();
}

std::int64_t TorchStoreClient::add(const std::string& key, std::int64_t delta, Deadline deadline) {
  std::lock_guard lock(mu_);
  ensure_connected(deadline);
  std::string q(1, static_cast<char>(codes().add));
  put_string(q, prefix_ + key);
  put_u64(q, static_cast<std::uint64_t>(delta));
  send(q, deadline, "ADD '" + key + "'");
  unsigned char r[8];
  recv(r, sizeof r, deadline, "ADD '" + key + "'");
  return static_cast<std::int64_t>(get_u64(r));
}

bool TorchStoreClient::wait(const std::vector<std::string>& keys, Deadline deadline) {
  std::lock_guard lock(mu_);
  ensure_connected(deadline);
  std::string q(1, static_cast<char>(codes().wait));
  put_u64(q, keys.size());
  for (const auto& k : keys) put_string(q, prefix_ + k);
  send(q, deadline, "WAIT");
  std::uint8_t r = 0;
  auto io = net::recv_exact(fd_.get(), &r, 1, deadline);
  if (io == net::Io::closed) lost();
  if (io == net::Io::ok) return true;  // STOP_WAITING
  abandon_wait();
  return false;
}

void TorchStoreClient::abandon_wait() {
  if (codes().cancel_wait >= 0) {
    // The server answers WAIT_CANCELED, after a STOP_WAITING if the keys came meanwhile.
    auto grace = Deadline::after(std::chrono::seconds(2));
    std::string q(1, static_cast<char>(codes().cancel_wait));
    std::uint8_t r = 0;
    auto io = net::send_all(fd_.get(), q.data(), q.size(), grace);
    if (io == net::Io::ok) io = net::recv_exact(fd_.get(), &r, 1, grace);
    if (io == net::Io::ok && r == 0) io = net::recv_exact(fd_.get(), &r, 1, grace);
    if (io == net::Io::ok && r == 1) return;
  }
  fd_.reset();  // the server forgets this connection's waits; the next call reconnects
}

std::vector<std::optional<std::string>> TorchStoreClient::multi_get(
    const std::vector<std::string>& keys, Deadline deadline) {
  std::lock_guard lock(mu_);
  ensure_connected(deadline);
  // Two pipelined round trips: CHECK every key, then GET the ones present.
  std::string q;
  for (const auto& k : keys) {
    q.push_back(static_cast<char>(codes().check));
    put_u64(q, 1);
    put_string(q, prefix_ + k);
  }
  send(q, deadline, "CHECK");
  std::vector<std::uint8_t> ready(keys.size());
  if (!keys.empty()) recv(ready.data(), ready.size(), deadline, "CHECK");
  q.clear();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (ready[i] != 0) continue;
    q.push_back(static_cast<char>(codes().get));
    put_string(q, prefix_ + keys[i]);
  }
  std::vector<std::optional<std::string>> out(keys.size());
  if (q.empty()) return out;
  send(q, deadline, "GET");
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (ready[i] == 0) out[i] = recv_string(deadline, "GET '" + keys[i] + "'");
  return out;
}

}  // namespace gpudiag
