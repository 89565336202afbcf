// The link test (gpudiag bench --links): every pair of ranks exchanges a
// buffer in both directions at once, and the pairs whose bandwidth falls far
// below their peers' are named, with the rank or host they have in common.
//
// Schedule: the circle method of a round-robin tournament. In each of n-1
// rounds (n if n is odd, one rank resting per round) the ranks form disjoint
// pairs, so every pair is measured once, all pairs of a round at the same
// time, and no rank's link is shared with another pair while it is measured:
// the way a collective loads the links, one peer at a time.
//
// Verdict: links are compared within their class (two ranks on one host, or
// on two hosts), against the class's upper quartile: the speed most links
// reach, which a few slow ones do not drag down. A link below kSlowFraction of
// it is slow. When every link of one rank in a class is slow (and not every
// link of the class), the rank is the likely cause (its NIC, PCIe slot, GPU);
// when every link between one host and the others is, the host is (its NIC,
// cable, switch port).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpudiag {

/// Rounds needed for `n` ranks to meet every other once.
int link_rounds(int n);
/// `rank`'s partner in `round` (0-based), or -1 if it rests in that round.
int link_partner(int rank, int round, int n);

/// The median (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> v);

/// A link is slow below this fraction of its class's upper quartile.
inline constexpr double kSlowFraction = 0.5;

struct LinkRank {
  int rank = 0;
  std::string host;
  std::string label;  ///< "rank 3 [node2-1]"
};

/// One pair's bandwidth: bytes each way per second with both directions busy.
struct LinkSpeed {
  int a = 0, b = 0;  ///< a < b
  double gbps = 0;
  bool same_host = false;
  bool slow = false;
};

struct LinkClass {
  std::string name;  ///< "same-host", "cross-host"
  int links = 0;
  int slow = 0;                                ///< of those links
  double median_gbps = 0, reference_gbps = 0;  ///< reference: upper quartile
  std::optional<LinkSpeed> slowest;
};

struct LinkVerdict {
  std::vector<LinkSpeed> links;    ///< every pair, in (a, b) order
  std::vector<LinkClass> classes;  ///< only classes with links
  std::vector<std::string>
      findings;  ///< one line each: slow hosts, ranks, then the other slow links
  int slow_links = 0;
};

/// `seconds[a][b]`: rank a's time for one exchange of `bytes` with rank b
/// (0 or missing: not measured). The two ends of a pair time the same
/// exchanges; the shorter time is the better estimate (the longer one
/// includes waiting for the partner to arrive).
LinkVerdict judge_links(const std::vector<LinkRank>& ranks,
                        const std::vector<std::vector<double>>& seconds, double bytes);

}  // namespace gpudiag
