// peer_identity.h: the peer's socket asked of the kernel by its 4-tuple
// (NETLINK_SOCK_DIAG, one exact lookup), else /proc/net/tcp{,6} parsed line by
// line; descendants found through /proc/<pid>/task/<tid>/children,
// descriptors through readlink.
#include "store/peer_identity.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace gpudiag::net {

namespace {

constexpr int kMaxLines = 200000;
constexpr int kMaxFdsPerProcess = 65536;

/// /proc/net's "0100007F:1F90" (IPv4) or 32 hex digits (IPv6), each 32-bit
/// word in host order, as 16 bytes of network order (IPv4 in the first 4).
bool parse_hex_addr(const std::string& s, unsigned char out[16], int& port) {
  const auto colon = s.find(':');
  if (colon == std::string::npos) return false;
  const std::string a = s.substr(0, colon);
  if (a.size() != 8 && a.size() != 32) return false;
  std::memset(out, 0, 16);
  for (std::size_t w = 0; w < a.size() / 8; ++w) {
    unsigned int word = 0;
    if (std::sscanf(a.substr(w * 8, 8).c_str(), "%8x", &word) != 1) return false;
    std::memcpy(out + 4 * w, &word, 4);  // the kernel printed its own host order
  }
  unsigned int p = 0;
  if (std::sscanf(s.c_str() + colon + 1, "%x", &p) != 1 || p > 65535) return false;
  port = static_cast<int>(p);
  return true;
}

/// A sockaddr as 16 bytes (IPv4 in the first 4, or IPv4-mapped IPv6 folded to it) and a port.
bool addr_bytes(const sockaddr_storage& ss, unsigned char out[16], int& port, bool& v6) {
  std::memset(out, 0, 16);
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    std::memcpy(out, &a->sin_addr, 4);
    port = ntohs(a->sin_port);
    v6 = false;
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    std::memcpy(out, &a->sin6_addr, 16);
    port = ntohs(a->sin6_port);
    v6 = true;
    return true;
  }
  return false;
}

std::optional<PeerSocket> find_in(const std::string& file, const unsigned char local[16],
                                  int local_port, const unsigned char remote[16], int remote_port,
                                  bool v6) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);  // header
  for (int n = 0; n < kMaxLines && std::getline(in, line); ++n) {
    char l[80] = {}, r[80] = {};
    unsigned int uid = 0;
    unsigned long long inode = 0;
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    if (std::sscanf(line.c_str(), " %*s %79s %79s %*s %*s %*s %*s %u %*s %llu", l, r, &uid,
                    &inode) != 4)
      continue;
    unsigned char la[16], ra[16];
    int lp = 0, rp = 0;
    if (!parse_hex_addr(l, la, lp) || !parse_hex_addr(r, ra, rp)) continue;
    const std::size_t n_bytes = v6 ? 16 : 4;
    if (lp == local_port && rp == remote_port && std::memcmp(la, local, n_bytes) == 0 &&
        std::memcmp(ra, remote, n_bytes) == 0 && inode != 0)
      return PeerSocket{inode, uid};
  }
  return std::nullopt;
}

/// The kernel's answer for the TCP socket whose local end is `src`:`sport`
/// and remote end `dst`:`dport` (inet_diag_find_one_icsk: an exact lookup, no
/// dump). `answered` is false when the kernel could not be asked (no
/// sock_diag), so the caller falls back to /proc/net.
std::optional<PeerSocket> ask_kernel(bool v6, const unsigned char src[16], int sport,
                                     const unsigned char dst[16], int dport, bool& answered) {
  answered = false;
  const int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return std::nullopt;
  timeval tv{0, 200000};  // the kernel answers at once; never hang the store on it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = v6 ? AF_INET6 : AF_INET;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  msg.req.id.idiag_sport = htons(static_cast<std::uint16_t>(sport));
  msg.req.id.idiag_dport = htons(static_cast<std::uint16_t>(dport));
  std::memcpy(msg.req.id.idiag_src, src, v6 ? 16 : 4);
  std::memcpy(msg.req.id.idiag_dst, dst, v6 ? 16 : 4);
  msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  std::optional<PeerSocket> out;
  alignas(nlmsghdr) char buf[8192];
  if (::send(fd, &msg, sizeof msg, 0) == static_cast<ssize_t>(sizeof msg)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
    if (n >= static_cast<ssize_t>(sizeof(nlmsghdr)) && NLMSG_OK(h, static_cast<std::size_t>(n))) {
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        // ENOENT: no such socket (the peer already closed it). Anything else
        // (no inet_diag in this kernel) leaves the question to /proc/net.
        answered = h->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr)) && e->error == -ENOENT;
      } else if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                 h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
        const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
        answered = true;
        if (m->idiag_inode != 0) out = PeerSocket{m->idiag_inode, m->idiag_uid};
      }
    }
  }
  ::close(fd);
  return out;
}

std::vector<pid_t> children_of(pid_t pid, const std::string& proc) {
  std::vector<pid_t> out;
  const std::string task = proc + "/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(task + "/" + e->d_name + "/children");
    long c = 0;
    while (out.size() < 65536 && (f >> c)) out.push_back(static_cast<pid_t>(c));
  }
  ::closedir(d);
  return out;
}

bool holds(pid_t pid, const std::string& want, const std::string& proc) {
  const std::string dir = proc + "/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  char buf[64];
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (++n > kMaxFdsPerProcess) break;
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const ssize_t len = ::readlinkat(::dirfd(d), e->d_name, buf, sizeof buf - 1);
    if (len > 0 && std::string(buf, static_cast<std::size_t>(len)) == want) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

}  // namespace

std::string peer_address(int fd, bool& loopback) {
  loopback = false;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
  }
  return text;
}

std::optional<PeerSocket> local_peer_socket(int fd, const std::string& proc_root) {
  sockaddr_storage mine{}, theirs{};
  socklen_t a = sizeof mine, b = sizeof theirs;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &a) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &b) != 0)
    return std::nullopt;
  unsigned char m[16], t[16];
  int mp = 0, tp = 0;
  bool v6 = false, v6b = false;
  if (!addr_bytes(mine, m, mp, v6) || !addr_bytes(theirs, t, tp, v6b)) return std::nullopt;
  // The peer's socket: its local end is our peer, its remote end is us. The
  // kernel is asked first; a dual-stack listener sees an IPv4 client as
  // ::ffff:a.b.c.d, whose own socket is IPv4.
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const bool folded = v6 && std::memcmp(m, mapped, 12) == 0 && std::memcmp(t, mapped, 12) == 0;
  if (proc_root == "/proc") {
    bool answered = false;
    unsigned char m4[16] = {}, t4[16] = {};
    if (folded) std::memcpy(m4, m + 12, 4), std::memcpy(t4, t + 12, 4);
    auto s = folded ? ask_kernel(false, t4, tp, m4, mp, answered) : ask_kernel(v6, t, tp, m, mp, answered);
    if (answered) return s;
  }
  if (auto s = find_in(proc_root + (v6 ? "/net/tcp6" : "/net/tcp"), t, tp, m, mp, v6)) return s;
  if (folded) {
    unsigned char m4[16] = {}, t4[16] = {};
    std::memcpy(m4, m + 12, 4);
    std::memcpy(t4, t + 12, 4);
    return find_in(proc_root + "/net/tcp", t4, tp, m4, mp, false);
  }
  return std::nullopt;
}

bool held_by_process(pid_t pid, std::uint64_t inode, const std::string& proc_root) {
  return holds(pid, "socket:[" + std::to_string(inode) + "]", proc_root);
}

std::vector<std::uint32_t> descendant_uids(pid_t root, int max_procs,
                                           const std::string& proc_root) {
  std::vector<std::uint32_t> uids;
  std::vector<pid_t> todo = children_of(root, proc_root);
  for (int seen = 0; !todo.empty() && seen < max_procs; ++seen) {
    const pid_t p = todo.back();
    todo.pop_back();
    struct stat st{};
    if (::stat((proc_root + "/" + std::to_string(p)).c_str(), &st) == 0 &&
        std::find(uids.begin(), uids.end(), st.st_uid) == uids.end())
      uids.push_back(st.st_uid);
    for (pid_t c : children_of(p, proc_root)) todo.push_back(c);
  }
  return uids;
}

std::optional<pid_t> holder_of(std::uint64_t inode, int max_procs, const std::string& proc_root) {
  const std::string want = "socket:[" + std::to_string(inode) + "]";
  DIR* d = ::opendir(proc_root.c_str());
  if (!d) return std::nullopt;
  std::optional<pid_t> found;
  int seen = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (++seen > max_procs) break;
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (holds(pid, want, proc_root)) {
      found = pid;
      break;
    }
  }
  ::closedir(d);
  return found;
}

char process_state(pid_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');  // the command may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : 0;
}

bool held_by_descendant(pid_t root, std::uint64_t inode, int max_procs,
                        const std::string& proc_root) {
  const std::string want = "socket:[" + std::to_string(inode) + "]";
  std::vector<pid_t> todo = children_of(root, proc_root);
  for (int seen = 0; !todo.empty() && seen < max_procs; ++seen) {
    const pid_t p = todo.back();
    todo.pop_back();
    if (holds(p, want, proc_root)) return true;
    for (pid_t c : children_of(p, proc_root)) todo.push_back(c);
  }
  return false;
}

}  // namespace gpudiag::net
