// The plain values a flight-recorder dump is made of, as the two readers
// (pickle.h, json_value.h) hand them to dump.h: None, bool, int, float, str,
// bytes, list, tuple and dict, and nothing else (no class, no function).
//
// A container is held by shared pointer: a pickle may name one container
// twice (torch's writer memoizes a frame dict every entry shares), and the
// reader then shares it instead of copying it. Every container records its
// height (1 + its deepest child) and its weight (how many values a full walk
// of it visits, shared parts counted each time they are reached), so the
// readers can refuse a dump whose depth or expanded size passes the limits
// before anything walks it: any walk of what a reader returned visits at most
// Limits::max_values values. A Value is 32 bytes (an int and a float share
// their place, a str and a container their pointer), a container 40 more and a
// str one allocation of its length and bytes: a reader holds at most about 150
// bytes a value besides the file (docs/fr.md, "Limits", has the figures).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::fr {

/// What one file may hold (docs/fr.md, "Limits").
struct Limits {
  std::uint64_t max_file_bytes = std::uint64_t{256} << 20;  ///< 256 MiB
  std::uint32_t max_depth = 64;                             ///< containers inside containers
  std::uint64_t max_values = std::uint64_t{4} << 20;        ///< values, shared ones each time
};

struct Container;

struct Value {
  enum class Kind : std::uint8_t { none, boolean, integer, real, text, bytes, list, tuple, dict };

  Kind kind = Kind::none;
  bool b = false;
  union {
    std::int64_t i = 0;  ///< integer
    double d;            ///< real
  };

  static Value none() { return {}; }
  static Value boolean(bool v);
  static Value integer(std::int64_t v);
  static Value real(double v);
  static Value text(std::string_view v);
  static Value bytes(std::string_view v);
  static Value container(Kind k);  ///< an empty list, tuple or dict

  bool is_container() const { return kind >= Kind::list; }
  bool is_list_like() const { return kind == Kind::list || kind == Kind::tuple; }
  bool is_text() const { return kind == Kind::text; }
  bool is_int() const { return kind == Kind::integer; }
  bool is_dict() const { return kind == Kind::dict; }
  /// A str's or bytes' bytes; empty for any other kind.
  std::string_view str() const;
  /// What this value holds, shared: values a pickle shares through its memo give the same
  /// address (nullptr for a scalar, and for an empty str).
  const void* shared_id() const { return ref_.get(); }
  /// The list, tuple or dict this value holds, nullptr for a scalar.
  Container* box() const;
  /// Items of a list or tuple; a dict's keys and values alternate (key, value, key, ...).
  const std::vector<Value>& items() const;
  /// The value of `key` (a str key) in a dict, the last one when a key repeats (as Python's
  /// dict keeps the last); nullptr when absent or when this is not a dict.
  const Value* get(std::string_view key) const;
  std::uint32_t height() const;  ///< 0 for a scalar
  std::uint64_t weight() const;  ///< 1 for a scalar
  /// "dict", "list", "str", ... as Python names the type.
  const char* type_name() const;

 private:
  /// A str's or bytes' length (8 bytes) then its bytes, or a Container, by kind.
  std::shared_ptr<void> ref_;
};

struct Container {
  std::vector<Value> items;
  std::uint64_t weight = 1;
  std::uint32_t height = 1;
  /// Set once the container is referenced a second time (a memo GET): a reader then refuses
  /// to change it, so what is shared stays what was shared and no container can come to
  /// hold itself.
  bool shared = false;
};

/// Why a file is not a flight-recorder dump gpudiag can read: one line, ready to follow
/// "not a flight-recorder dump: ". The readers throw it; dump.h catches it per file.
class FormatError : public std::runtime_error {
 public:
  explicit FormatError(const std::string& what, bool truncated = false)
      : std::runtime_error(what), truncated_(truncated) {}
  /// The file ends before the dump does: a rank killed while writing it.
  bool truncated() const { return truncated_; }

 private:
  bool truncated_;
};

/// What a reader has built so far, against Limits: every value it makes is charged once,
/// every reference to a value it already made is charged that value's weight, every memo
/// slot a pickle fills is charged once (the memo holds what it names as a list would), and
/// append() refuses a container deeper than max_depth or a change to a shared one.
class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  /// Throws FormatError once more than max_values were charged in all.
  void charge(std::uint64_t n);
  /// Adds `child` to the container `parent` (a list, tuple or dict), keeping its height and
  /// weight; throws FormatError past max_depth or when `parent` is shared.
  void append(Value& parent, Value child);
  std::uint64_t charged() const { return charged_; }
  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
  std::uint64_t charged_ = 0;
};

}  // namespace gpudiag::fr
