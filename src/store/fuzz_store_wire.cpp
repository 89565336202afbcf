// libFuzzer target: any bytes through both ends of gpudiag's store protocol
// (store/store_wire.h, docs/rendezvous.md).
//
// Server side: the bytes arrive on a real connection (a socketpair) of a
// ServerCore, the store server's protocol half, exactly as from a client. The
// first input byte picks whether a valid magic and HELLO go first, so the
// fuzzer reaches requests without having to find the handshake. Whatever it
// sends must end in replies, refusals or a dropped connection: never a crash,
// a leak, an allocation past the limits (run with -malloc_limit_mb) or a hang.
//
// Client side: the same bytes read as a stream of reply frames, each decoded
// as the client does (reply cap, value, integer, a MULTI_GET's values with the
// count asked for, an error): a ProtocolError is the only way out.
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/server_conn.h"
#include "store/store_limits.h"
#include "store/store_wire.h"

namespace {

namespace sw = gpudiag::storewire;

class FuzzServer : public gpudiag::ServerCore {
 public:
  explicit FuzzServer(gpudiag::TcpStoreServerOptions o) : ServerCore(std::move(o)) {}

  /// Feeds `bytes` to a new connection as its client would, then closes it.
  void serve(std::string_view bytes) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) __builtin_trap();
    int big = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    auto conn = std::make_unique<gpudiag::Conn>(gpudiag::net::Fd(sv[0]), 7, "fuzz");
    conns_.emplace(7, std::move(conn));
    char sink[65536];
    for (int round = 0; round < 100000 && !bytes.empty(); ++round) {
      ssize_t w = ::send(sv[1], bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (w > 0) bytes.remove_prefix(static_cast<std::size_t>(w));
      auto* c = find(7);
      if (!c) break;
      on_event(*c, EPOLLIN);
      while (::recv(sv[1], sink, sizeof sink, 0) > 0) {
      }
      c = find(7);
      if (c && !c->doomed && c->pending_out()) on_event(*c, EPOLLOUT);
      bury();
      if (w <= 0 && !find(7)) break;
    }
    if (auto* c = find(7)) close_conn(*c);
    ::close(sv[1]);
  }

 protected:
  void set_events(int, std::uint64_t, std::uint32_t) override {}
  std::string overloaded_why() const override { return "fuzz"; }
};

void decode_replies(std::string_view buf) {
  sw::Frame f{};
  try {
    while (sw::next_frame(buf, f, gpudiag::storelimits::kMaxReplyFrame)) {
      sw::Reader r(f.payload);
      switch (f.type) {
        case sw::Type::value:
          r.str();
          break;
        case sw::Type::integer:
          r.i64();
          break;
        case sw::Type::values:
          sw::read_values(r, f.id % 64);
          break;
        case sw::Type::error:
          r.u8(), r.str();
          break;
        case sw::Type::hello_ok:
          r.u16();
          break;
        default:
          break;
      }
      buf.remove_prefix(f.total);
    }
  } catch (const sw::ProtocolError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // the server's warnings about this "client"
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  decode_replies(bytes);
  if (bytes.empty()) return 0;
  gpudiag::TcpStoreServerOptions o;
  o.token = "job";
  o.world_size = 4;
  o.max_stored_bytes = 1 << 20;  // small caps, so the fuzzer reaches them
  o.max_buffered_total = 4 << 20;
  o.max_pending_output = 1 << 20;
  FuzzServer server(o);
  std::string input;
  if (bytes[0] & 1)
    input = std::string(sw::kMagic) +
            sw::Writer(sw::Type::hello, 0).u16(sw::kVersion).str("job").finish();
  input.append(bytes.substr(1));
  server.serve(input);
  return 0;
}
