// Who is at the other end of an accepted TCP connection, for the store's
// rule that only the job's own processes keep connections without proving
// the job secret (a torch client cannot: it has no handshake).
//
// On this host the peer's socket is asked of the kernel by its 4-tuple
// (sock_diag: its local address and port are our connection's peer address
// and port; the answer gives its owner's uid and the socket's inode), one
// lookup however many sockets the host holds; only a kernel without
// sock_diag has /proc/net/tcp or tcp6 read instead. It belongs to the job
// when a descendant of the serving process (the launcher: its ranks and
// their children) holds that inode among its descriptors (/proc/<pid>/fd).
// SO_PEERCRED says nothing on TCP. Elsewhere the peer is known by its
// address alone. Every read is bounded (lines, processes, descriptors).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag::net {

struct PeerSocket {
  std::uint64_t inode = 0;
  std::uint32_t uid = 0;
};

/// The peer's address of connected socket `fd` ("127.0.0.1", "::1", ...) and
/// whether it is a loopback address.
std::string peer_address(int fd, bool& loopback);

/// The peer's own socket of connection `fd` when the peer is on this host
/// (loopback or one of the host's addresses, in this network namespace;
/// nullopt for a peer elsewhere): the kernel's answer
/// when `proc_root` is "/proc" and the kernel has sock_diag, else read from
/// `proc_root`/net (any other `proc_root` is a test's); nullopt when not found.
std::optional<PeerSocket> local_peer_socket(int fd, const std::string& proc_root = "/proc");

/// Whether process `pid` itself holds socket `inode` (the store's own
/// process: its judges' connections to the store it serves).
bool held_by_process(pid_t pid, std::uint64_t inode, const std::string& proc_root = "/proc");

/// The distinct owners (uids of /proc/<pid>) of the processes descended from
/// `root`, at most `max_procs` looked at: a connection of a uid not among them
/// cannot be held by a descendant, so no descriptor need be read to say so.
std::vector<std::uint32_t> descendant_uids(pid_t root, int max_procs = 4096,
                                           const std::string& proc_root = "/proc");

/// The process that holds socket `inode` among its descriptors, looking at
/// at most `max_procs` processes of /proc; nullopt when none was found.
std::optional<pid_t> holder_of(std::uint64_t inode, int max_procs = 65536,
                               const std::string& proc_root = "/proc");

/// The state letter of /proc/<pid>/stat ('R', 'S', 'D', 'T' stopped, 't'
/// traced, 'Z', ...), 0 when the process is gone.
char process_state(pid_t pid, const std::string& proc_root = "/proc");

/// Whether a process descended from `root` (not `root` itself) holds socket
/// `inode`; at most `max_procs` processes are looked at.
bool held_by_descendant(pid_t root, std::uint64_t inode, int max_procs = 4096,
                        const std::string& proc_root = "/proc");

}  // namespace gpudiag::net
