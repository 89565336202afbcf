// Naming the likely cause of a wrong result (pattern.h's `suspect`).
//
// Each hypothesis predicts every element of the segment holding the first
// wrong element: "rank p's contribution is missing" (sum: expected - v,
// prod: expected / v, max/min: the others' extreme where p owns the element),
// "... counted twice" (expected + v, expected * v), and "this is the block of
// rank q" (a data-moving collective's block from another rank; reduce_scatter's
// block for another rank). Every p and q is tried against the first wrong
// element, which leaves few; the survivors must then match the got values on
// the 4096 elements from there on (right and wrong ones alike) and on up to 64
// later elements the suspect owns. One surviving rank becomes the suspect.
// This runs only on a failed check, so it favours plainness over speed:
// O(n) hypotheses, a few elements each.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "bench/pattern_codes.h"
#include "comm/host_reduce.h"

namespace gpudiag::pattern_detail {

namespace {

enum class Kind : std::uint8_t { missing, doubled, block };

struct Hypothesis {
  Kind kind;
  int p;
};

// The bits of `code` as an element of `t` (the rounding conversions: a
// prediction may fall outside the exact range the fill loops rely on).
std::uint64_t code_bits(DType t, std::int64_t code) {
  switch (t) {
    case DType::half:
      return float_to_half(static_cast<float>(code));
    case DType::bfloat16:
      return float_to_bf16(static_cast<float>(code));
    case DType::float32:
      return std::bit_cast<std::uint32_t>(static_cast<float>(code));
    case DType::float64:
      return std::bit_cast<std::uint64_t>(static_cast<double>(code));
    default:
      break;
  }
  const std::size_t bits = dtype_size(t) * 8;
  const auto u = static_cast<std::uint64_t>(code);
  return bits == 64 ? u : u & ((std::uint64_t{1} << bits) - 1);
}

std::uint64_t element_bits(const void* data, std::size_t i, DType t) {
  std::uint64_t v = 0;
  const std::size_t size = dtype_size(t);
  std::memcpy(&v, static_cast<const unsigned char*>(data) + i * size, size);  // little endian
  return v;
}

// The others' extreme at g when rank p, g's owner, is missing (max/min).
std::optional<std::int64_t> extreme_without(const Plan& pl, int p, std::uint64_t g) {
  if (pl.n < 2) return std::nullopt;
  const std::int64_t set = pl.ones[g & 15] - rank_bit(p, g);  // others with the bit set
  const std::int64_t clear = (pl.n - 1) - set;
  if (pl.mode == Mode::max) return cval(pl, g) + (set > 0 ? 1 : 0);
  return cval(pl, g) + 2 + (clear > 0 ? 0 : 1);
}

class Diagnosis {
 public:
  Diagnosis(const Plan& pl, const void* got, int rank, const Segment& s)
      : pl_(pl), got_(got), rank_(rank), s_(s) {}

  /// The predicted code of recv element i under h; nullopt: no prediction.
  std::optional<std::int64_t> predict(const Hypothesis& h, std::size_t i) const {
    const std::uint64_t k = i - s_.offset, g = s_.g0 + k;
    if (h.kind == Kind::block)
      return s_.src >= 0 ? move_code(pl_, h.p, g)
                         : reduced_any(pl_, static_cast<std::uint64_t>(h.p) * pl_.count + k);
    const std::int64_t e = reduced_any(pl_, g), v = contribution(pl_, h.p, g);
    switch (pl_.mode) {
      case Mode::dense_sum:
      case Mode::sparse_sum:
        return h.kind == Kind::missing ? e - v : e + v;
      case Mode::prod:
        return h.kind == Kind::missing ? e / v : e * v;
      case Mode::max:
      case Mode::min:
        if (h.kind == Kind::doubled || !owns(pl_, h.p, g)) return e;
        return extreme_without(pl_, h.p, g);
      case Mode::move:
        break;
    }
    return std::nullopt;
  }

  bool holds_at(const Hypothesis& h, std::size_t i) const {
    const auto code = predict(h, i);
    return code && code_bits(pl_.type, *code) == element_bits(got_, i, pl_.type);
  }

  /// Whether h explains the window after `first` and the suspect's later
  /// owned elements.
  bool holds(const Hypothesis& h, std::size_t first) const {
    const std::size_t end = s_.offset + s_.len;
    const std::size_t window_end = std::min(end, first + 4096);
    for (std::size_t i = first; i < window_end; ++i)
      if (!holds_at(h, i)) return false;
    if (h.kind == Kind::block || !has_owner(pl_.mode)) return true;
    const std::uint64_t n = static_cast<std::uint64_t>(pl_.n);
    const std::uint64_t g_end = s_.g0 + (end - s_.offset);
    std::uint64_t g = s_.g0 + (window_end - s_.offset);
    g += (static_cast<std::uint64_t>(h.p) + n - g % n) % n;
    for (int checked = 0; g < g_end && checked < 64; g += n, ++checked)
      if (!holds_at(h, s_.offset + (g - s_.g0))) return false;
    return true;
  }

  std::string explain(std::size_t first) const {
    std::vector<Kind> kinds;
    if (s_.src >= 0 || (pl_.coll == Coll::reduce_scatter && pl_.op != RedOp::avg))
      kinds.push_back(Kind::block);
    if (s_.src < 0 && pl_.op != RedOp::avg) {
      kinds.push_back(Kind::missing);
      if (pl_.mode != Mode::max && pl_.mode != Mode::min) kinds.push_back(Kind::doubled);
    }
    std::vector<Hypothesis> found;
    for (Kind kind : kinds)
      for (int p = 0; p < pl_.n; ++p) {
        const Hypothesis h{kind, p};
        if (kind == Kind::block && p == (s_.src >= 0 ? s_.src : rank_)) continue;
        if (holds_at(h, first) && holds(h, first)) found.push_back(h);
      }
    if (found.empty()) return "";
    const int p = found.front().p;
    for (const Hypothesis& h : found)
      if (h.p != p) return "";  // more than one rank explains it
    return message(found, p);
  }

 private:
  std::string message(const std::vector<Hypothesis>& found, int p) const {
    const std::string who = "rank " + std::to_string(p);
    bool missing = false, doubled = false;
    for (const Hypothesis& h : found) {
      if (h.kind == Kind::block) {
        if (s_.src < 0)
          return "the reduced block for " + who + " landed at the wrong place (rank " +
                 std::to_string(rank_) + "'s block belongs there)";
        if (pl_.coll == Coll::broadcast)
          return who + "'s data arrived instead of the root's (rank " + std::to_string(s_.src) +
                 ")";
        if (pl_.coll == Coll::sendrecv)
          return who + "'s data arrived instead of rank " + std::to_string(s_.src) + "'s";
        return "the block from " + who + " landed at the wrong place (rank " +
               std::to_string(s_.src) + "'s block belongs there)";
      }
      (h.kind == Kind::missing ? missing : doubled) = true;
    }
    if (missing && doubled) return who + "'s contribution is missing or counted twice";
    return who + "'s contribution is " + (missing ? "missing" : "counted twice");
  }

  const Plan& pl_;
  const void* got_;
  int rank_;
  Segment s_;
};

}  // namespace

std::string diagnose(const Plan& pl, const void* got, int rank, std::size_t first) {
  for (std::size_t si = 0, ns = segment_count(pl, rank); si < ns; ++si) {
    const Segment s = segment(pl, rank, si);
    if (first >= s.offset && first < s.offset + s.len)
      return Diagnosis(pl, got, rank, s).explain(first);
  }
  return "";
}

}  // namespace gpudiag::pattern_detail
