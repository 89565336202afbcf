// query() (client.h): connect, handshake, TIMEOUT, SET FORMAT json, VERBOSE STATUS, read to
// EOF, parse. POSIX sockets through the helpers of store/socket.h.
#include "nccl_ras/client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "store/socket.h"
#include "util/deadline.h"
#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::ras {

namespace {

constexpr std::size_t kMaxLine = 4096;
constexpr const char* kRemedy =
    "; try: check that the job runs NCCL 2.24 or later on that host, without NCCL_RAS_ENABLE=0, "
    "and that NCCL_RAS_ADDR there names this address";

/// A quoted stranger's line for a message: at most 80 bytes, every byte outside printable
/// ASCII as \xNN (RAS speaks ASCII: anything else is someone else's bytes).
std::string quote(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string q = "'";
  for (unsigned char c : s.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      q += static_cast<char>(c);
    } else {
      q += "\\x";
      q += hex[c >> 4];
      q += hex[c & 15];
    }
  }
  return q + (s.size() > 80 ? "...'" : "'");
}

/// One non-blocking connect per address of `host`, each bounded; the first that connects.
net::Fd connect_any(const Endpoint& e, Deadline deadline, std::string& error, bool& refused) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(e.host.c_str(), std::to_string(e.port).c_str(), &hints, &res);
  if (rc != 0) {
    error = e.host +
            " does not resolve: " + (rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc));
    return {};
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  refused = true;
  std::string errors;
  for (auto* ai = res; ai; ai = ai->ai_next) {
    const std::string addr = net::sockaddr_text(ai->ai_addr, ai->ai_addrlen);
    net::Fd s(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    int err = s ? 0 : errno;
    if (s && ::connect(s.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{s.get(), POLLOUT, 0};
        const auto attempt = deadline.min(Deadline::after(std::chrono::seconds(3)));
        int n = 0;
        while (((n = ::poll(&p, 1, attempt.poll_ms())) == 0 || (n < 0 && errno == EINTR)) &&
               !attempt.expired()) {
        }
        socklen_t len = sizeof err;
        err = n > 0 ? (::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len), err) : ETIMEDOUT;
      }
    }
    if (err == 0) return s;
    if (err != ECONNREFUSED) refused = false;
    errors += (errors.empty() ? "" : ", ") + addr + ": " + std::strerror(err);
  }
  error = "nothing answered at " + e.text() + " (" + errors + ")";
  return {};
}

/// One exchange on one connection.
class Session {
 public:
  Session(net::Fd fd, const QueryOptions& o, Deadline deadline)
      : fd_(std::move(fd)), o_(o), deadline_(deadline) {}
  int fd() const { return fd_.get(); }

  /// Sends `line`; the one-line answer within `wait_s`, or nullopt with `why` set (`silent`
  /// when it timed out).
  std::optional<std::string> ask(const std::string& line, std::string& why, bool& silent,
                                 double wait_s) {
    silent = false;
    const auto step = deadline_.min(Deadline::after_seconds(wait_s));
    if (!send(line)) {
      why = "the connection closed before '" + line + "' could be sent";
      return std::nullopt;
    }
    while (true) {
      if (auto nl = pending_.find('\n'); nl != std::string::npos) {
        std::string answer = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        if (!answer.empty() && answer.back() == '\r') answer.pop_back();
        return answer;
      }
      if (pending_.size() > kMaxLine) {
        why = "it answered '" + line + "' with a line longer than 4 KiB: not NCCL RAS";
        return std::nullopt;
      }
      auto io = net::recv_some(fd_.get(), pending_, step);
      if (io == net::Io::timeout) {
        silent = true;
        why = "no answer to '" + line + "' within " + human_seconds(wait_s);
        return std::nullopt;
      }
      if (io == net::Io::closed) {
        if (!pending_.empty()) return std::exchange(pending_, {});  // a last line, unended
        why = "the connection closed after '" + line + "' without an answer";
        return std::nullopt;
      }
    }
  }

  bool send(const std::string& line) {
    const std::string out = line + "\n";
    const auto step = deadline_.min(Deadline::after_seconds(o_.greeting_s));
    return net::send_all(fd_.get(), out.data(), out.size(), step) == net::Io::ok;
  }

  /// Everything up to EOF, within reply_s() of now.
  bool read_reply(std::string& reply, std::string& why) {
    reply = std::move(pending_);
    const double wait_s = std::min(o_.reply_s(), deadline_.remaining().count() / 1000.0);
    const auto until = deadline_.min(Deadline::after_seconds(o_.reply_s()));
    while (reply.size() <= o_.max_reply) {
      auto io = net::recv_some(fd_.get(), reply, until);
      if (io == net::Io::closed) return true;
      if (io == net::Io::timeout) {
        why = "RAS sent " + std::to_string(reply.size()) +
              " bytes of its report and did not finish within " + human_seconds(wait_s) +
              " (it waits for slow processes up to its TIMEOUT and 5 s more; a larger "
              "--timeout gives it longer)";
        return false;
      }
    }
    why = "RAS's reply passed " + human_bytes(o_.max_reply) + " (--max-reply)";
    return false;
  }

 private:
  net::Fd fd_;
  const QueryOptions& o_;
  Deadline deadline_;
  std::string pending_;
};

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

bool fail(Outcome& out, std::string why) {
  out.error = std::move(why);
  return false;
}

/// After the greeting: TIMEOUT, the format, STATUS, the reply. False with `out.error`.
bool converse(Session& s, const QueryOptions& o, Outcome& out) {
  std::string why;
  bool silent = false;
  auto ok = s.ask("TIMEOUT " + std::to_string(o.collect_timeout_s), why, silent, o.greeting_s);
  if (!ok) return fail(out, why);
  if (*ok != "OK") return fail(out, "RAS refused TIMEOUT: " + quote(*ok));
  out.format = "text";
  if (o.format != Format::text) {
    auto f = s.ask("SET FORMAT json", why, silent, o.reply_s());
    if (!f) return fail(out, why);
    if (*f == "OK") {
      out.format = "json";
    } else if (starts_with_nocase(*f, "ERROR: Unknown command")) {
      out.format_note = "this NCCL has no JSON report (SET FORMAT came in 2.28.7): read its text";
      if (o.format == Format::json)
        return fail(out,
                    "RAS does not know SET FORMAT json (NCCL before 2.28.7); try: --format "
                    "text or auto");
    } else {
      return fail(out, "RAS answered SET FORMAT json with " + quote(*f));
    }
  }
  const std::string command = o.verbose ? "VERBOSE STATUS" : "STATUS";
  if (!s.send(command))
    return fail(out, "the connection closed before " + command + " could be sent");
  if (!s.read_reply(out.reply, why)) return fail(out, why);
  try {
    out.report = out.format == "json" ? parse_json(out.reply) : parse_text(out.reply);
  } catch (const ParseError& e) {
    return fail(out, e.what());
  }
  out.answered = true;
  return true;
}

}  // namespace

Outcome query(const Endpoint& endpoint, const QueryOptions& o) {
  Outcome out;
  out.endpoint = endpoint;
  const auto start = Deadline::Clock::now();
  const auto deadline = Deadline::after_seconds(o.cap_s());
  const auto retrying = deadline.min(Deadline::after_seconds(o.retry_s));
  int silent_connections = 0;
  while (!out.answered) {
    std::string why;
    bool refused = false;
    net::Fd fd = connect_any(endpoint, deadline, why, refused);
    if (!fd) {
      out.refused = refused && silent_connections == 0;
      out.error = silent_connections > 0 ? why + " after " + std::to_string(silent_connections) +
                                               " silent connection(s)"
                                         : why + (refused ? kRemedy : "");
      break;
    }
    ++out.connections;
    Session s(std::move(fd), o, deadline);
    bool silent = false;
    auto greeting = s.ask("CLIENT PROTOCOL 2", why, silent, o.greeting_s);
    if (!greeting && silent && !retrying.expired()) {
      ++silent_connections;  // a stopped process may hold this one: ask again
      continue;
    }
    if (!greeting) {
      out.error = silent ? "every connection to " + endpoint.text() + " (" +
                               std::to_string(out.connections) +
                               ") was accepted and never "
                               "answered: a stopped or hung process holds the port"
                         : why;
      break;
    }
    if (!starts_with_nocase(*greeting, "SERVER PROTOCOL ")) {
      out.error = "not NCCL RAS at " + endpoint.text() + ": it answered " + quote(*greeting);
      break;
    }
    if (auto v = parse_int(trim(std::string_view(*greeting).substr(16))))
      out.protocol = static_cast<int>(*v);
    if (o.vet) {
      if (auto no = o.vet(s.fd(), out.answered_by); !no.empty()) {
        out.untrusted = true;
        out.error = std::move(no);
        break;
      }
    }
    if (!converse(s, o, out)) break;
  }
  if (out.answered && out.protocol != 2)
    out.report.notes.push_back("RAS speaks protocol " + std::to_string(out.protocol) +
                               " (gpudiag knows 2); its report was read all the same");
  out.seconds = seconds_since(start);
  return out;
}

}  // namespace gpudiag::ras
