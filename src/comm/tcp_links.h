// The TCP connections behind host/tcp, and the loop that moves bytes on them.
//
// Every connection is one-way in use: a rank sends on the ones it opened and
// receives on the ones it accepted, so a Link to a peer is two sockets. Each
// opens with a 20-byte hello (magic, rank, job token hash, channel) so the
// accepting side knows who is calling and why, and drops anything else (a
// port scanner, a rank of another job). Channels: 0 is the ring (to the next
// rank, from the previous one); k+1 is the partner at XOR distance 2^k, which
// recursive halving and doubling use in worlds of a power of two >= 4;
// kMeshChannel is every other rank, for the link test, opened on request.
#pragma once

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/tcp_ring.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

struct Link {
  net::Fd out, in;  ///< out: our bytes to the peer; in: its bytes to us
  std::string out_label, in_label;
};

struct Links {
  Link ring;                   ///< out to the next rank, in from the previous one
  std::vector<Link> partners;  ///< [k]: to and from rank ^ (1 << k); empty unless n = 2^m >= 4
};

/// Opens and accepts every connection `peers.rank` needs by `deadline`; gives
/// up early when `abort_check` has a reason (a peer announced dead).
Links connect_links(RingListener& listener, const RingPeers& peers, Deadline deadline,
                    const AbortCheck& abort_check = {});

/// Links to and from every other rank ([peers.rank] stays empty), by `deadline`.
/// Gives up early when `abort_check` has a reason (a peer announced dead).
std::vector<Link> connect_mesh(RingListener& listener, const RingPeers& peers, Deadline deadline,
                               const AbortCheck& abort_check);

[[noreturn]] void lost_link(const std::string& who);

/// Polls are skipped while data flows; when neither direction can move, a
/// few yields come before sleeping in poll, because on a busy host the peer
/// that owes us data may be waiting for this very core.
inline constexpr int kYieldsBeforePoll = 64;

/// The most one send() or recv() moves. Whole buffers in one call let the
/// kernel queue megabytes that fall out of the cache before the peer reads
/// them; 256 KiB at a time keeps both copies in cache and, over loopback with
/// 2 ranks, gave 1.3-2x the bandwidth of uncapped calls at 4-128 MiB (128 KiB
/// to 1 MiB were within noise of each other; docs/BENCHMARKS.md).
inline constexpr std::size_t kIoChunk = 256u << 10;

/// Called when neither direction of `link` could move (`idle` counts such
/// calls): yields, or every kYieldsBeforePoll-th time sleeps in poll until
/// the wanted directions can move. Throws when the link breaks or
/// `abort_check` gives a reason ("<what> abandoned: ..."); returns true when
/// a poll found nothing and `deadline` has passed, for the caller to say
/// where it stalled.
inline bool wait_for_link(Link& link, bool want_send, bool want_recv, int& idle, Deadline deadline,
                          const AbortCheck& abort_check, const char* what) {
  if (++idle < kYieldsBeforePoll) {
    sched_yield();
    return false;
  }
  idle = 0;
  pollfd p[2] = {{link.out.get(), static_cast<short>(want_send ? POLLOUT : 0), 0},
                 {link.in.get(), static_cast<short>(want_recv ? POLLIN : 0), 0}};
  int rc = ::poll(p, 2, deadline.poll_ms(100));
  if (rc < 0 && errno != EINTR) throw Error(ExitCode::broken, "poll failed on a host/tcp link");
  if (p[0].revents & (POLLERR | POLLHUP)) lost_link(link.out_label);
  if (rc != 0) return false;
  if (abort_check)
    if (auto why = abort_check())
      throw Error(ExitCode::broken, std::string(what) + " abandoned: " + *why);
  return deadline.expired();
}

/// A copy that needs no peer (a rank's own block of an all-gather or
/// alltoall), done alongside a transfer instead of after it. When the copy's
/// source is also what goes out, each sent run is copied right after send()
/// read it, still in cache; otherwise a chunk is copied whenever the link
/// cannot move.
struct SideCopy {
  char* to = nullptr;
  const char* from = nullptr;
  std::size_t bytes = 0, done = 0;
  /// Copies up to byte `limit` of the copy.
  void upto(std::size_t limit) {
    limit = std::min(limit, bytes);
    if (limit > done) std::memcpy(to + done, from + done, limit - done), done = limit;
  }
  /// Copies the next chunk; false when nothing is left.
  bool step() {
    if (done >= bytes) return false;
    upto(done + kIoChunk);
    return true;
  }
  /// Bytes [0, sent) of `out` just went out: copy them too if they are ours.
  void sent_from(const char* out, std::size_t sent) {
    if (out == from) upto(sent);
  }
  void finish() { upto(bytes); }
};

/// For exchange() callers that need no word of progress.
struct NoProgress {
  void operator()(std::size_t) const {}
};

/// Sends `out_bytes` bytes on link.out while `in_bytes` bytes arrive on
/// link.in; `arrived(k)` runs whenever the first k bytes are in; `side`,
/// if any, is copied while the link waits and is complete on return. Ends
/// at `deadline` (TimeoutError) or when `abort_check` gives a reason (Error).
template <class F = NoProgress>
void exchange(Link& link, const void* out, std::size_t out_bytes, void* in, std::size_t in_bytes,
              Deadline deadline, const AbortCheck& abort_check, F arrived = {},
              SideCopy* side = nullptr) {
  const char* o = static_cast<const char*>(out);
  char* i = static_cast<char*>(in);
  std::size_t sent = 0, got = 0;
  int idle = 0;
  while (sent < out_bytes || got < in_bytes) {
    bool moved = false;
    if (sent < out_bytes) {
      ssize_t k = ::send(link.out.get(), o + sent, std::min(kIoChunk, out_bytes - sent),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && errno != EAGAIN && errno != EINTR) lost_link(link.out_label);
      if (k > 0) sent += static_cast<std::size_t>(k), moved = true;
      if (k > 0 && side) side->sent_from(o, sent);
    }
    if (got < in_bytes) {
      ssize_t k = ::recv(link.in.get(), i + got, std::min(kIoChunk, in_bytes - got), MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) lost_link(link.in_label);
      if (k > 0) {
        got += static_cast<std::size_t>(k), moved = true;
        arrived(got);
      }
    }
    if (moved) {
      idle = 0;
      continue;
    }
    if (side && side->step()) continue;
    if (wait_for_link(link, sent < out_bytes, got < in_bytes, idle, deadline, abort_check,
                      "collective"))
      throw TimeoutError("collective over TCP stalled: " + human_bytes(sent) + " of " +
                             human_bytes(out_bytes) + " sent to " + link.out_label + ", " +
                             human_bytes(got) + " of " + human_bytes(in_bytes) + " received from " +
                             link.in_label,
                         "one of them is stuck or its link is down");
  }
  if (side) side->finish();
}

}  // namespace gpudiag
