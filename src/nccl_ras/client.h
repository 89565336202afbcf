// A bounded client of NCCL's RAS socket: asks one endpoint `VERBOSE STATUS` and reads the
// reply into a Report.
//
// The protocol, from src/ras/client.cc (the ncclras tool) and client_support.cc
// rasClientEventLoop (NCCL 2.24.3 to 2.30.7): commands are lines; "CLIENT PROTOCOL 2" is
// answered "SERVER PROTOCOL 2"; "TIMEOUT <s>" (how long RAS waits for the other processes)
// "OK"; "SET FORMAT json" "OK" from 2.28.7, and "ERROR: Unknown command ..." before, which is
// how the version is told (the protocol number is 2 in every version); then "VERBOSE
// STATUS" is answered with the report and the connection closed: the reply ends at EOF.
// Every process of a node listens on the same port (SO_REUSEPORT) and the kernel picks one
// per connection, so a stopped or hung process may take a connection and never answer: as
// ncclras does, a connection with no greeting within `greeting_s` is dropped and another
// opened, for `retry_s`.
// Everything read is untrusted: lines are capped at 4 KiB, the reply at `max_reply`, every
// read has the deadline, and whatever goes wrong is one line in Outcome::error.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "nccl_ras/endpoint.h"
#include "nccl_ras/report.h"

namespace gpudiag::ras {

enum class Format { automatic, text, json };

/// The waits are ncclras's (src/ras/client.cc connectToNCCL, getNCCLStatus): 1 s for each
/// answer of the handshake (SO_RCVTIMEO of TIMEOUT_INCREMENT); after TIMEOUT, 1 + TIMEOUT +
/// RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC (5) for the answer to SET FORMAT and for the report,
/// which RAS sends once its collective ends (at most its leg timeout plus 5 s:
/// ras_internal.h RAS_COLLECTIVE_EXTRA_TIMEOUT). ncclras retries silent connections
/// forever; gpudiag for `retry_s`, and never past `deadline_s`.
struct QueryOptions {
  int collect_timeout_s = 5;  ///< "TIMEOUT n": RAS_COLLECTIVE_LEG_TIMEOUT_SEC is 5
  double greeting_s = 1;      ///< one connection's wait for each one-line answer
  double retry_s = 11;        ///< how long silent connections are dropped and another opened
  double deadline_s = 0;      ///< a cap on the whole exchange; 0: retry_s + the waits above
  Format format = Format::automatic;
  std::size_t max_reply = std::size_t{64} << 20;
  bool verbose = true;  ///< VERBOSE STATUS (names every outlier) or STATUS
  /// Whose answer this is, asked once the other side has greeted (so it has
  /// accepted the connection): "" to go on, setting `who` to how the answer
  /// is to be attributed, or why it is not to be believed (the exchange then
  /// stops there, Outcome::untrusted). Unset: anyone's answer is read.
  std::function<std::string(int fd, std::string& who)> vet;
  /// The wait for SET FORMAT's answer, and for the report after STATUS.
  double reply_s() const { return 1.0 + collect_timeout_s + 5.0; }
  double cap_s() const {
    return deadline_s > 0 ? deadline_s : retry_s + 2 * greeting_s + 2 * reply_s();
  }
};

struct Outcome {
  Endpoint endpoint;
  bool answered = false;    ///< a reply arrived and was read into `report`
  std::string error;        ///< why not, one line ending in "; try: ..." when a remedy is known
  bool refused = false;     ///< nothing listens there: every address refused the connection
  bool untrusted = false;   ///< QueryOptions::vet refused whoever answered (`error` says why)
  std::string answered_by;  ///< QueryOptions::vet's `who`
  std::string format;       ///< "json" or "text": what RAS was asked for
  std::string format_note;  ///< why text when JSON was wanted
  int protocol = -1;        ///< the number after SERVER PROTOCOL
  int connections = 0;      ///< opened; more than 1: silent processes took the others
  double seconds = 0;
  std::string reply;  ///< the reply to STATUS as received (at most max_reply bytes)
  Report report;
};

/// Never throws for what the other side does; `cap_s()` bounds it.
Outcome query(const Endpoint& endpoint, const QueryOptions& options);

}  // namespace gpudiag::ras
