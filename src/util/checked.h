// A value read from outside (the environment, a file) that a job may never
// use: the value, or the one-line error and its remedy, thrown only when the
// value is used. So a malformed setting stops the jobs that need it and not
// the others (settings/job_settings.h).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "util/error.h"

namespace gpudiag {

template <typename T>
class Checked {
 public:
  /// Not read: refused, as a setting used before it was read would be.
  Checked() : error_("a setting was used before it was read") {}
  Checked(T v) : value_(std::move(v)) {}  // NOLINT: implicit, as optional's
  static Checked refused(std::string what, std::string remedy) {
    Checked c;
    c.error_ = std::move(what), c.remedy_ = std::move(remedy);
    return c;
  }
  /// Reads with `read`; a UsageError it throws is kept for `get`.
  template <typename F>
  static Checked from(F read) {
    try {
      return Checked(read());
    } catch (const UsageError& e) {
      return refused(e.what(), e.remedy());
    }
  }
  bool ok() const { return value_.has_value(); }
  /// The value; throws the UsageError it was refused with.
  const T& get() const {
    if (!value_) throw UsageError(error_, remedy_);
    return *value_;
  }

 private:
  std::optional<T> value_;
  std::string error_, remedy_ = "report this as a bug in gpudiag";
};

}  // namespace gpudiag
