// The NCCL model's unique id and bootstrap (nccl_model.h), after NCCL's
// src/bootstrap.cc (tag v2.28.9-1). A unique id is an ncclBootstrapHandle
// (src/include/bootstrap.h: a 64-bit magic and a socket address, the rest
// zeros). ncclGetUniqueId makes a new one and starts its bootstrap root
// (bootstrapGetUniqueId); the model, which stands for every rank's NCCL,
// knows each root it started. An init reaches its root on the init thread
// (bootstrapInit -> sendToRoot): an address that is no socket address fails
// at once, a root that no longer listens (its communicator was made) refuses
// the connection, and a root already holding another init's check-in, or
// sharing its port with another root (NCCL_COMM_ID), never answers. With
// ncclCommInitRankScalable's nId ids the ranks are split between nId roots
// (bootstrapInit: rootIdFromRank); this rank checks in with its own, the
// virtual peers with all of them, and the init completes only when every
// root collects its ranks: a root that does not listen, the same root twice,
// or ids that differ between ranks (each root then hears from ranks that
// count roots or blocks otherwise: bootstrapRoot's "mismatch in info from
// procs", or never its last ranks) leave it pending until aborted.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>

#include "comm/nccl_model_impl.h"
#include "comm/nccl_roots.h"

namespace gpudiag {

using nccl_abi::Result;
using M = NcclModel::Impl;

namespace {

// The handle's layout: magic (8 bytes), then sockaddr_in/in6 (28): family,
// port (network order), IPv4 address.
constexpr std::uint64_t kNcclMagic = 0x0280028002800280ull;  // src/include/comm.h NCCL_MAGIC
constexpr std::size_t kHandleBytes = 36;
constexpr std::uint16_t kAfInet = 2, kAfInet6 = 10;

std::string handle_key(const nccl_abi::UniqueId& id) {
  return std::string(id.internal, kHandleBytes);
}
std::uint16_t family(const nccl_abi::UniqueId& id) {
  std::uint16_t f = 0;
  std::memcpy(&f, id.internal + 8, sizeof f);
  return f;
}
void write_handle(nccl_abi::UniqueId* id, std::uint64_t magic, std::uint32_t ip,
                  std::uint16_t port) {
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, &magic, 8);
  std::memcpy(id->internal + 8, &kAfInet, 2);
  const unsigned char p[2] = {static_cast<unsigned char>(port >> 8),
                              static_cast<unsigned char>(port)};
  std::memcpy(id->internal + 10, p, 2);
  for (int i = 0; i < 4; ++i) id->internal[12 + i] = static_cast<char>(ip >> (24 - 8 * i));
}
/// src/misc/socket.cc ncclSocketToString: "127.0.0.1<40001>".
std::string address_text(const nccl_abi::UniqueId& id) {
  auto b = [&](int i) { return static_cast<unsigned>(static_cast<unsigned char>(id.internal[i])); };
  char s[64];
  std::snprintf(s, sizeof s, "%u.%u.%u.%u<%u>", b(12), b(13), b(14), b(15), b(10) * 256 + b(11));
  return s;
}
/// NCCL_COMM_ID as src/misc/socket.cc ncclSocketGetAddrFromString takes it:
/// "<ipv4>:<port>", "[<ipv6>]:<port>" or "<hostname>:<port>". The model puts
/// a name's hash where NCCL would put the address it resolves to.
bool comm_id_address(const std::string& s, std::uint32_t& ip, std::uint16_t& port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  long p = 0;
  for (char ch : s.substr(colon + 1)) {
    if (ch < '0' || ch > '9' || (p = p * 10 + (ch - '0')) > 65535) return false;
  }
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  const std::string host = s.substr(0, colon);
  if (std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a < 256 &&
      b < 256 && c < 256 && d < 256)
    ip = a << 24 | b << 16 | c << 8 | d;
  else
    ip = static_cast<std::uint32_t>(std::hash<std::string>{}(host));
  port = static_cast<std::uint16_t>(p);
  return true;
}

}  // namespace

std::string model_handle_key(const nccl_abi::UniqueId& id) { return handle_key(id); }

// src/init.cc ncclGetUniqueId -> src/bootstrap.cc bootstrapGetUniqueId: a
// random magic and this host's bootstrap address, whose root it starts
// (bootstrapCreateRoot). With NCCL_COMM_ID set: NCCL_MAGIC and that address,
// and no root (rank 0's init starts it); a malformed one is refused.
Result model_get_unique_id(nccl_abi::UniqueId* id) {
  M& m = *M::current;
  std::lock_guard<std::recursive_mutex> lock(m.m);
  std::memset(id->internal, 0, sizeof id->internal);
  if (const std::string* env = m.env("NCCL_COMM_ID")) {
    std::uint32_t ip = 0;
    std::uint16_t port = 0;
    if (!comm_id_address(*env, ip, port)) {
      m.last_error =
          "Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or [<ipv6>]:<port> or "
          "<hostname>:<port>";
      return nccl_abi::kInvalidArgument;
    }
    write_handle(id, kNcclMagic, ip, port);
    return nccl_abi::kSuccess;
  }
  ++m.issued;
  const std::uint64_t magic =
      (std::uint64_t{m.rng()} << 32 | m.rng()) + static_cast<unsigned>(m.issued);
  write_handle(id, magic, 0x7f000001, static_cast<std::uint16_t>(40000 + m.issued % 20000));
  m.roots[handle_key(*id)].listening = 1;
  return nccl_abi::kSuccess;
}

/// src/bootstrap.cc bootstrapInit: rank `rank` checks in with root
/// rootIdFromRank(rank, nranks, nId), the first rank of a root also with the
/// previous one, and its peers with the rest. Under NCCL_COMM_ID rank 0
/// alone drops to the first id (src/init.cc ncclCommInitRankDev), so with
/// nId > 1 its root and its peers' disagree.
void M::name_roots(Comm& c, const nccl_abi::UniqueId* ids, int nid) {
  const int own = nccl_root_of_rank(o.rank, c.nranks, nid);
  c.id = ids[own];
  c.root = model_handle_key(ids[own]);
  c.other_roots.clear();
  for (int i = 0; i < nid; ++i)
    if (i != own) c.other_roots.push_back(model_handle_key(ids[i]));
  c.ids_disagree = nid > 1 && env("NCCL_COMM_ID") != nullptr;
  if (peer_ids) {
    const auto& p = *peer_ids;
    bool same = static_cast<int>(p.size()) == nid;
    for (int i = 0; same && i < nid; ++i)
      same = std::memcmp(p[i].internal, ids[i].internal, sizeof ids[i].internal) == 0;
    c.ids_disagree = c.ids_disagree || !same;
  }
}

bool M::roots_never_answer(const Comm& c) const {
  if (c.ids_disagree) return true;
  std::set<std::string> seen{c.root};
  for (const std::string& key : c.other_roots) {
    auto it = roots.find(key);
    if (!seen.insert(key).second || it == roots.end() || it->second.listening == 0 ||
        it->second.collecting > 0)
      return true;
  }
  return false;
}

/// The init thread (src/init.cc ncclCommInitRankFunc -> src/bootstrap.cc
/// bootstrapInit): the id's address must be a socket address
/// (src/misc/socket.cc ncclSocketInit: ncclInternalError at once), its root
/// must listen (else the connect is refused and retried
/// NCCL_SOCKET_RETRY_CNT = 34 times, growing sleeps of 100 ms, about a minute,
/// then ncclRemoteError: socketConnectCheck), and must answer: a root
/// holding another init's check-in, or two roots on one address, gives up or
/// mixes communicators, and no rank hears back.
void M::start_init(Comm& c) {
  c.init_queued = false;
  c.pending.clear();
  c.async = nccl_abi::kInProgress;
  c.launching = true;
  c.thread_live = true;
  c.initing = true;
  c.outcome = nccl_abi::kSuccess;
  c.launch_ready_at = host;
  c.pending_polls = o.init_polls;
  c.waits_for_peers = false;
  if (const auto f = family(c.id); f != kAfInet && f != kAfInet6) {
    c.outcome = nccl_abi::kInternalError;
    c.outcome_warn = "ncclSocketInit: connecting to address  with family " + std::to_string(f) +
                     " is neither AF_INET(2) nor AF_INET6(10)";
    c.pending_polls = 1;
    return;
  }
  auto it = roots.find(c.root);
  if (it == roots.end() || it->second.listening == 0) {
    c.outcome = nccl_abi::kRemoteError;
    c.outcome_warn = "socketStartConnect: connect to " + address_text(c.id) +
                     " returned Connection refused, exceeded error retry count after 35 attempts";
    c.pending_polls = o.connect_polls;
    return;
  }
  Root& root = it->second;
  const bool never = roots_never_answer(c);
  for (const std::string& key : c.other_roots) ++roots[key].collecting;
  if (++root.collecting > 1 || root.listening > 1) {
    for (Comm& other : comms)
      if (other.initing && other.root == c.root) other.waits_for_peers = true;
    return;
  }
  c.waits_for_peers = never || (o.peers_absent && c.nranks > 1);
}

/// The same on the caller's thread (a blocking communicator); where NCCL
/// would wait for good the model answers ncclInternalError.
Result M::init_inline(Comm& c) {
  c.init_queued = false;
  if (const auto f = family(c.id); f != kAfInet && f != kAfInet6) {
    last_error = "ncclSocketInit: connecting to address  with family " + std::to_string(f) +
                 " is neither AF_INET(2) nor AF_INET6(10)";
    return nccl_abi::kInternalError;
  }
  auto it = roots.find(c.root);
  if (it == roots.end() || it->second.listening == 0) {
    last_error = "socketStartConnect: connect to " + address_text(c.id) +
                 " returned Connection refused, exceeded error retry count after 35 attempts";
    return nccl_abi::kRemoteError;
  }
  if (it->second.collecting > 0 || it->second.listening > 1 || roots_never_answer(c) ||
      (o.peers_absent && c.nranks > 1)) {
    last_error = "model: a blocking init whose peers never come blocks forever in NCCL";
    return nccl_abi::kInternalError;
  }
  ++it->second.collecting;
  for (const std::string& key : c.other_roots) ++roots[key].collecting;
  init_succeeded(c);
  return nccl_abi::kSuccess;
}

/// Every rank checked in: the root's thread ends (bootstrapRoot), and the
/// init reaches initTransportsRank, which before 2.22 also connects the
/// collectives' rings and trees (runtime connection arrived in 2.22).
void M::init_succeeded(Comm& c) {
  auto ends = [&](const std::string& key) {
    Root& root = roots[key];
    --root.collecting;
    --root.listening;
  };
  ends(c.root);
  for (const std::string& key : c.other_roots) ends(key);
  c.init_done = true;
  if (o.version < 22200) c.connected = true;
}

}  // namespace gpudiag
