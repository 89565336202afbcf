// Where a process's NCCL RAS listens, read once from the settings NCCL itself reads.
//
// NCCL (2.24 and later) starts a RAS thread in every process that creates a communicator,
// unless NCCL_RAS_ENABLE is anything but 1 (src/bootstrap.cc: `ncclParamRasEnable() == 1`;
// src/misc/param.cc reads the number with strtoll, so "0", "no" and "2" all turn it off). The
// thread listens for clients on NCCL_RAS_ADDR, default localhost:28028 (src/ras/
// client_support.cc rasClientInitSocket), "host:port" or "[IPv6]:port" (a host without a
// port is port 65535, as NCCL parses it; see kPortlessPort); every process of a
// node binds the same address (SO_REUSEPORT), and any of them answers for the whole job.
// This is the one file that reads NCCL_RAS_ADDR and NCCL_RAS_ENABLE.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "util/env.h"

namespace gpudiag::ras {

/// NCCL_RAS_CLIENT_PORT in src/ras/ras_internal.h (2.24.3 to 2.30.7).
inline constexpr int kDefaultPort = 28028;
/// Where NCCL listens for NCCL_RAS_ADDR=HOST without a port: src/misc/utils.cc
/// parseStringList leaves the port -1, and src/misc/socket.cc ncclSocketGetAddrFromString
/// stores htons(-1), port 65535 (2.24.3 to 2.30.7).
inline constexpr int kPortlessPort = 65535;

struct Endpoint {
  std::string host = "localhost";
  int port = kDefaultPort;
  /// "host:port", "[::1]:port" for an IPv6 address.
  std::string text() const;
  bool operator==(const Endpoint&) const = default;
};

/// "HOST", "HOST:PORT", "[IPV6]", "[IPV6]:PORT", or a bare IPv6 address (two colons or
/// more); the port defaults to 28028. nullopt with `why` set when it is none of these.
std::optional<Endpoint> parse_endpoint(std::string_view text, std::string* why = nullptr);

/// What a process started with `env` does with RAS, as NCCL decides it.
struct RasSettings {
  bool enabled = true;  ///< NCCL_RAS_ENABLE unset, or a number that is 1
  Endpoint endpoint;    ///< NCCL_RAS_ADDR (no port: 65535), else localhost:28028
  std::string from = "the default localhost:28028";  ///< where `endpoint` came from
  bool named = false;  ///< NCCL_RAS_ADDR named the endpoint (the user asked for this one)
  std::string problem;      ///< NCCL_RAS_ADDR that NCCL could not use ("" none)
  std::string disabled_by;  ///< "NCCL_RAS_ENABLE=0" when !enabled
};

RasSettings ras_settings(const Env& env);

}  // namespace gpudiag::ras
