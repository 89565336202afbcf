// NCCL backend (see nccl.h): the unique id and the communicator's creation.
// Creation is non-blocking (ncclCommInitRankConfig with blocking = 0, or
// ncclCommInitRankScalable with the same 2.14 config when several bootstrap
// roots' ids are given: comm/nccl_roots.h) and
// polled with ncclCommGetAsyncError against the deadline and abort_check, so
// a peer that never comes ends in a named timeout and an ncclCommAbort, never
// in a hang inside NCCL's bootstrap. Every way out but success aborts, never
// destroys: NCCL refuses to destroy a communicator that is pending or in an
// error state (src/init.cc ncclCommDestroy), and its ncclCommAbort returns
// even while the init waits for peers (the abort flag ends the init thread,
// ncclGroupJobAbort joins it). nccl_comm.cpp runs the collectives.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl.h"
#include "util/error.h"

namespace gpudiag {

namespace {

using nccl_abi::Result;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// `whose`: "rank 0's NCCL unique id", "root 2's NCCL unique id".
nccl_abi::UniqueId parse_id(const std::string& hex, const std::string& whose) {
  nccl_abi::UniqueId id{};
  if (hex.size() != 2 * sizeof id.internal)
    throw Error(ExitCode::broken, whose + " arrived malformed (" + std::to_string(hex.size()) +
                                      " hex digits, expected 256)",
                "ranks running different gpudiag versions?");
  for (std::size_t i = 0; i < sizeof id.internal; ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw Error(ExitCode::broken, whose + " arrived malformed (not hex)",
                  "ranks running different gpudiag versions?");
    id.internal[i] = static_cast<char>(hi * 16 + lo);
  }
  return id;
}

}  // namespace

std::string nccl_make_unique_id(const NcclApi& nccl) {
  nccl_abi::UniqueId id{};
  const Result r = nccl.GetUniqueId(&id);
  if (r != nccl_abi::kSuccess)
    throw Error(ExitCode::broken,
                std::string("ncclGetUniqueId failed: ") + nccl.GetErrorString(r),
                "NCCL could not find a network interface for its bootstrap; set "
                "NCCL_SOCKET_IFNAME to an interface the ranks share");
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (char c : id.internal) {
    auto b = static_cast<unsigned char>(c);
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::unique_ptr<Communicator> make_nccl_communicator(const NcclContext& ctx,
                                                     const std::string& unique_id_hex, int rank,
                                                     int size, Deadline deadline,
                                                     const AbortCheck& abort_check) {
  return make_nccl_communicator(ctx, std::vector<std::string>{unique_id_hex}, rank, size, deadline,
                                abort_check);
}

std::unique_ptr<Communicator> make_nccl_communicator(const NcclContext& ctx,
                                                     const std::vector<std::string>& root_ids_hex,
                                                     int rank, int size, Deadline deadline,
                                                     const AbortCheck& abort_check) {
  const NcclApi& api = *ctx.nccl;
  const int roots = static_cast<int>(root_ids_hex.size());
  if (roots < 1) throw Error(ExitCode::broken, "NCCL communicator init: no unique id to start from");
  if (roots > 1 && !api.CommInitRankScalable)
    throw Error(ExitCode::broken,
                "NCCL communicator init from " + std::to_string(roots) +
                    " bootstrap roots needs ncclCommInitRankScalable, which this NCCL lacks "
                    "(it arrived in NCCL 2.23)",
                "run NCCL 2.23 or newer on every rank, or GPUDIAG_NCCL_ROOTS=1");
  std::vector<nccl_abi::UniqueId> ids;
  for (int i = 0; i < roots; ++i)
    ids.push_back(parse_id(root_ids_hex[i], roots == 1 ? std::string("rank 0's NCCL unique id")
                                                       : "root " + std::to_string(i) +
                                                             "'s NCCL unique id"));
  const std::string call = roots == 1 ? "ncclCommInitRankConfig" : "ncclCommInitRankScalable";
  nccl_abi::Config config;
  config.blocking = 0;
  nccl_abi::CommHandle comm = nullptr;
  const std::string before = nccl_last_error_now(api);
  // Both take the same config; nId > 1 splits the ranks between the roots.
  const Result r = roots == 1
                       ? api.CommInitRankConfig(&comm, size, ids[0], rank, &config)
                       : api.CommInitRankScalable(&comm, size, rank, roots, ids.data(), &config);
  auto give_up = [&](const std::string& msg, ExitCode code, const std::string& remedy) {
    if (comm) api.CommAbort(comm);
    if (code == ExitCode::timeout) throw TimeoutError(msg, remedy);
    throw Error(code, msg, remedy);
  };
  // NCCL's last error is read right after the failing call or poll, before
  // the abort (which may WARN), and compared with the one before the init.
  auto failed = [&](const std::string& what, Result res) {
    const NcclLastError last = nccl_last_error(api, before);
    give_up(what + nccl_failure_text(api, res, last), ExitCode::broken,
            nccl_failure_remedy(res, last));
  };
  if (r != nccl_abi::kSuccess && r != nccl_abi::kInProgress)
    failed(call + " failed: ", r);
  for (int polls = 0;; ++polls) {
    Result st = nccl_abi::kInProgress;
    if (comm) api.CommGetAsyncError(comm, &st);
    if (st == nccl_abi::kSuccess) break;
    if (st != nccl_abi::kInProgress) failed("NCCL communicator init failed: ", st);
    if (abort_check)
      if (auto why = abort_check())
        give_up("NCCL communicator init abandoned: " + *why, ExitCode::broken, "");
    if (deadline.expired())
      give_up("NCCL communicator init" +
                  (roots > 1 ? " (" + call + ", " + std::to_string(roots) + " bootstrap roots)"
                             : std::string()) +
                  " did not complete in time (aborted)",
              ExitCode::timeout,
              "NCCL's bootstrap could not reach all peers: check NCCL_SOCKET_IFNAME and "
              "firewalls, and run with --nccl-debug info");
    if (polls > 100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto c = wrap_nccl_communicator(ctx, comm, rank, size);
  c->set_abort_check(abort_check);
  return c;
}

}  // namespace gpudiag
