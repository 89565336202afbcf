// Reading a child's error file (error_file.h): open without following a
// link the child may have planted, read at most kMaxErrorFile + 1 bytes,
// parse without exceptions, take the fields of either shape; the `at` line
// is the user's innermost frame, not the standard library's or gpudiag's.
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

/// Whether a traceback's `File "path"` names code the user did not write:
/// a frozen or built-in module ("<frozen os>", "<string>"), the standard
/// library (.../lib/python3.11/os.py), an installed package (site-packages,
/// dist-packages), or gpudiag's own scripts, whose frames sit between the
/// user's call and the raise (ReplicaCheck's ReplicaDivergence).
bool foreign_file(const std::string& path) {
  if (path.empty() || path[0] == '<') return true;
  if (path.find("/site-packages/") != std::string::npos ||
      path.find("/dist-packages/") != std::string::npos)
    return true;
  for (const char* lib : {"/lib/python", "/lib64/python"}) {
    const auto at = path.find(lib);
    if (at == std::string::npos) continue;
    // ".../lib/python3.11/os.py": a version, then the module's file.
    std::size_t i = at + std::strlen(lib);
    while (i < path.size() && (std::isdigit(static_cast<unsigned char>(path[i])) || path[i] == '.'))
      ++i;
    if (i < path.size() && path[i] == '/' && i > at + std::strlen(lib)) return true;
  }
  const auto slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base == "replica_check.py" || base == "dump_activations.py" || base == "gpudiag_scan.py";
}

/// The path of a `File "x.py", line 12, in f` line ("" when it is not one).
std::string frame_file(const std::string& frame) {
  if (frame.compare(0, 6, "File \"") != 0) return "";
  const auto end = frame.find("\", line ", 6);
  return end == std::string::npos ? "" : frame.substr(6, end - 6);
}

/// The user's innermost frame of a Python traceback: of the last traceback
/// (the exception raised; chained ones come before it), its last `File
/// "x.py", line 12, in f` line that is not foreign_file(); the last frame
/// when every frame is foreign. The whole stack stays in the file.
std::string user_frame(const std::string& stack) {
  std::string last, user;
  std::size_t at = 0;
  while (at < stack.size()) {
    std::size_t end = stack.find('\n', at);
    if (end == std::string::npos) end = stack.size();
    std::string line = stack.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("Traceback (most recent call last)", 0) == 0) {
      last.clear();
      user.clear();
      continue;
    }
    const auto lead = line.find_first_not_of(' ');
    if (lead == std::string::npos || line.compare(lead, 5, "File ") != 0) continue;
    line = line.substr(lead);
    last = line;
    if (!foreign_file(frame_file(line))) user = line;
  }
  return cut(user.empty() ? last : user, 300);
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
      e.where = user_frame(x["py_callstack"].get<std::string>());
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
