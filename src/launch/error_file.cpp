// Reading a child's error file (error_file.h): open without following a
// link the child may have planted, read at most kMaxErrorFile + 1 bytes,
// parse without exceptions, take the fields of either shape.
#include "launch/error_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/text.h"

namespace gpudiag::launch {

namespace {

std::string cut(const std::string& s, std::size_t n) {
  std::string c = clean_text(s);
  return c.size() > n ? c.substr(0, n) + "..." : c;
}

/// The last "File "x.py", line 12, in f" line of a Python traceback.
std::string last_frame(const std::string& stack) {
  std::string best;
  std::size_t at = 0;
  while (at < stack.size()) {
    std::size_t end = stack.find('\n', at);
    if (end == std::string::npos) end = stack.size();
    std::string line = stack.substr(at, end - at);
    const auto lead = line.find_first_not_of(' ');
    if (lead != std::string::npos && line.compare(lead, 5, "File ") == 0) best = line.substr(lead);
    at = end + 1;
  }
  return cut(best, 300);
}

}  // namespace

std::optional<ChildError> read_child_error(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return ChildError{"(the error file cannot be opened: " + std::string(std::strerror(errno)) + ")",
                      "", 0};
  }
  std::string text;
  char buf[65536];
  while (text.size() <= kMaxErrorFile) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (text.size() > kMaxErrorFile)
    return ChildError{"(the error file is larger than 1 MiB: not read)", "", 0};
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  ChildError e;
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message")) {
    e.message = "(the error file is not torch's error JSON)";
    return e;
  }
  const auto& m = doc["message"];
  if (m.is_string()) {
    e.message = cut(m.get<std::string>(), 500);
    return e;
  }
  if (!m.is_object() || !m.contains("message") || !m["message"].is_string()) {
    e.message = "(the error file is not torch's error JSON)";
    return e;
  }
  e.message = cut(m["message"].get<std::string>(), 500);
  if (m.contains("extraInfo") && m["extraInfo"].is_object()) {
    const auto& x = m["extraInfo"];
    if (x.contains("py_callstack") && x["py_callstack"].is_string())
      e.where = last_frame(x["py_callstack"].get<std::string>());
    if (x.contains("timestamp") && x["timestamp"].is_string()) {
      const std::string& t = x["timestamp"].get_ref<const std::string&>();
      char* end = nullptr;
      const long long v = std::strtoll(t.c_str(), &end, 10);
      if (end && *end == 0 && v > 0) e.timestamp = v;
    }
  }
  return e;
}

Divergence replica_divergence(const std::string& message) {
  static const std::string head = "replicas diverged at step ";
  const auto at = message.find(head);
  if (at == std::string::npos) return {};
  Divergence d{true, -1};
  // "<step>: rank <R> differs from ..."
  std::size_t i = at + head.size();
  while (i < message.size() && std::isdigit(static_cast<unsigned char>(message[i]))) ++i;
  static const std::string rank = ": rank ";
  if (message.compare(i, rank.size(), rank) != 0) return d;
  i += rank.size();
  std::size_t j = i;
  while (j < message.size() && j - i < 8 && std::isdigit(static_cast<unsigned char>(message[j]))) ++j;
  if (j == i || message.compare(j, 14, " differs from ") != 0) return d;
  d.rank = std::atoi(message.substr(i, j - i).c_str());
  return d;
}

}  // namespace gpudiag::launch
