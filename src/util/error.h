// Errors a user can act on, and the exit codes they map to.
//
// Code throws gpudiag::Error (or a subclass) with what happened and, when one
// is known, what to try; main() catches once and prints a single line
//   gpudiag: <what>; try: <remedy>
// then exits with the error's code. The codes are part of the CLI contract.
#pragma once

#include <stdexcept>
#include <string>

namespace gpudiag {

/// Process exit statuses (documented in README.md, "Exit status").
enum class ExitCode : int {
  ok = 0,        ///< every rank OK / scan clean
  broken = 1,    ///< a rank is broken / scan found inf or nan
  usage = 2,     ///< bad command line, environment or input file
  timeout = 3,   ///< a peer did not answer within --timeout
  internal = 4,  ///< a bug in gpudiag: please report it
  device = 5,    ///< scan: the GPU failed while scanning (a CUDA error): no verdict on the data
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what, std::string remedy = {})
      : std::runtime_error(what), code_(code), remedy_(std::move(remedy)) {}

  ExitCode code() const { return code_; }
  const std::string& remedy() const { return remedy_; }
  /// "what; try: remedy" or just "what".
  std::string one_line() const {
    return remedy_.empty() ? std::string(what()) : std::string(what()) + "; try: " + remedy_;
  }

 private:
  ExitCode code_;
  std::string remedy_;
};

/// Bad command line, environment or input: exit status 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what, std::string remedy = {})
      : Error(ExitCode::usage, what, std::move(remedy)) {}
};

/// A peer or a device did not answer in time: exit status 3.
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& what, std::string remedy = {})
      : Error(ExitCode::timeout, what, std::move(remedy)) {}
};

}  // namespace gpudiag
