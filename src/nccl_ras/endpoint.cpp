// parse_endpoint() and ras_settings() (endpoint.h).
#include "nccl_ras/endpoint.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::ras {

std::string Endpoint::text() const {
  return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                             : host + ":" + std::to_string(port);
}

namespace {

bool fail(std::string* why, std::string what) {
  if (why) *why = std::move(what);
  return false;
}

bool parse_port(std::string_view text, int& port, std::string* why) {
  auto v = parse_int(text);
  if (!v || *v < 1 || *v > 65535)
    return fail(why, "the port must be a number from 1 to 65535, not '" + clean_text(text) + "'");
  port = static_cast<int>(*v);
  return true;
}

bool valid_host(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
          c == ':' || c == '%'))
      return false;
  return true;
}

}  // namespace

std::optional<Endpoint> parse_endpoint(std::string_view text, std::string* why) {
  Endpoint e;
  std::string_view host = text;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) {
      fail(why, "an IPv6 address opened with '[' must close with ']'");
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      fail(why, "expected ':PORT' after ']'");
      return std::nullopt;
    }
    if (!rest.empty() && !parse_port(rest.substr(1), e.port, why)) return std::nullopt;
  } else if (auto colon = text.find(':'); colon != std::string_view::npos &&
                                          text.find(':', colon + 1) == std::string_view::npos) {
    host = text.substr(0, colon);
    if (!parse_port(text.substr(colon + 1), e.port, why)) return std::nullopt;
  }
  if (!valid_host(host)) {
    fail(why, "'" + clean_text(text) +
                  "' is not HOST[:PORT] (a host name, an IPv4 address or "
                  "[an IPv6 address], then an optional port)");
    return std::nullopt;
  }
  e.host = std::string(host);
  return e;
}

RasSettings ras_settings(const Env& env) {
  RasSettings s;
  if (auto v = env.get("NCCL_RAS_ENABLE"); v && !v->empty()) {
    // src/misc/param.cc ncclLoadParam: strtoll(str, nullptr, 0), the default on overflow.
    errno = 0;
    long long n = std::strtoll(v->c_str(), nullptr, 0);
    if (errno == 0 && n != 1) {
      s.enabled = false;
      s.disabled_by = "NCCL_RAS_ENABLE=" + clean_text(*v);
    }
  }
  if (auto v = env.get("NCCL_RAS_ADDR")) {
    const std::string& text = *v;
    const std::string named = "NCCL_RAS_ADDR=" + clean_text(text);
    std::string why;
    // src/misc/socket.cc ncclSocketGetAddrFromString, the same from 2.24.3 to 2.30.7.
    if (!text.empty() && text.front() != '[' && std::count(text.begin(), text.end(), ':') > 1) {
      // parseStringList (src/misc/utils.cc) cuts HOST:PORT at the first ':'.
      s.problem = named +
                  " is not one NCCL can listen on: NCCL reads HOST:PORT up to the first ':' "
                  "(an IPv6 address must be written [ADDRESS]:PORT)";
    } else if (!text.empty() && text.front() == '[' && text.find("]:") == std::string::npos) {
      // The port is atoi of what follows "]:": 0, so the kernel picks one no client knows.
      s.problem = named +
                  " gives no port: NCCL then listens on a port the kernel picks, which no client "
                  "can know (write [ADDRESS]:PORT)";
    } else if (auto e = parse_endpoint(text, &why)) {
      s.endpoint = *e;
      s.from = named;
      s.named = true;
      if (text.find(':') == std::string::npos) {
        // parseStringList leaves the port -1, and sin_port = htons(-1) is 65535.
        s.endpoint.port = kPortlessPort;
        s.from += " (no port: NCCL listens on " + std::to_string(kPortlessPort) + ")";
      }
    } else {
      s.problem = named + " is not one NCCL can listen on: " + why;
    }
  }
  return s;
}

}  // namespace gpudiag::ras
