// What one rank of a node reads of the node's hardware and its other ranks
// take from it (plane.h, Plane::read_on_node), so that a node of eight ranks
// reads its kernel log and sysfs once, not eight times: the line that makes
// the node unfit ("" when fit), the findings by "class/action" and the
// sources that could not be read. Sent as a small JSON object and decoded as
// any other rank's record is: bounded, every field checked; a text that is
// not one is nullopt, and the rank then reads the node for itself.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <functional>

#include "hw/evidence.h"
#include "plane/plane.h"

namespace gpudiag::hw {

/// Bounds on what a node's verdict may hold (a peer's text is untrusted).
inline constexpr std::size_t kMaxVerdictLine = 1024;
inline constexpr std::size_t kMaxVerdictCounts = 32;
inline constexpr std::size_t kMaxVerdictUnreadable = 8;

struct NodeVerdict {
  std::string unfit;                    ///< unfit_reason's line; "" when fit
  std::map<std::string, int> counts;    ///< finding_counts
  std::vector<std::string> unreadable;  ///< HwEvidence::unreadable
};

/// The verdict of evidence read in a window that started at `since_usec`.
NodeVerdict node_verdict(const HwEvidence& e, std::optional<std::uint64_t> since_usec);

std::string encode_node_verdict(const NodeVerdict& v);

/// nullopt unless `text` is an encoded verdict within the bounds above.
std::optional<NodeVerdict> decode_node_verdict(const std::string& text);

/// The key under which the ranks of one node share a read named `what`
/// ("check-start", ...): ranks that read the same sources on the same host
/// share it, and ranks pointed at other sources (a test's tree) do not.
std::string node_read_key(const std::string& what, const std::string& host, const HwSources& s);

/// A verdict and whether this rank read it itself.
struct NodeVerdictRead {
  NodeVerdict verdict;
  bool here = true;
};

/// The node's verdict through `plane` (Plane::read_on_node under `key`):
/// `read` runs where `who` says; a text from another rank that does not
/// decode is set aside and this rank runs `read` itself. Says at debug level
/// which it was ("rank 3 read the node's hardware evidence (check-start)").
NodeVerdictRead read_node_verdict(Plane& plane, const std::string& key, NodeReader who,
                                  const std::function<NodeVerdict()>& read, Deadline deadline);

}  // namespace gpudiag::hw
