// Reading a rank's stack (stacks.h): Python's faulthandler dump, eu-stack's
// and gdb's frames, each line cut at a bound before it is parsed; and a
// rank's summary, the innermost frame that says where it is (its own code,
// not libc's waits or a library's), and whether it waits for another rank
// (by the names of wait_frames.h).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string_view>

#include "launch/stacks.h"
#include "launch/wait_frames.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

std::string base(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool in_library(const std::string& frame) {
  return frame.find("/site-packages/") != std::string::npos ||
         frame.find("/dist-packages/") != std::string::npos ||
         frame.find("/lib/python3") != std::string::npos || frame.rfind("<frozen ", 0) == 0;
}

/// "/x/train.py:42 in main" -> "train.py:42 in main".
std::string short_frame(const std::string& f) {
  const auto colon = f.find(':');
  if (colon == std::string::npos) return f;
  return base(f.substr(0, colon)) + f.substr(colon);
}

/// A rank's dump line as it is read: at most kMaxLine characters (a longer
/// one is cut there, as the cross-node summaries cut theirs), so a line of
/// any length costs the same bounded, non-recursive parse.
constexpr std::size_t kMaxLine = 4096;

/// The lines of `text`, each cut at kMaxLine.
template <class F>
void each_line(const std::string& text, F f) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    f(std::string_view(text).substr(at, std::min(end - at, kMaxLine)));
    at = end + 1;
  }
}

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Python's faulthandler: `  File "PATH", line N in FUNC`.
std::optional<std::string> python_frame(std::string_view line) {
  const std::size_t lead = line.find_first_not_of(" \t");
  if (lead == 0 || lead == std::string_view::npos) return std::nullopt;
  line.remove_prefix(lead);
  constexpr std::string_view file = "File \"", at = "\", line ";
  if (!line.starts_with(file)) return std::nullopt;
  line.remove_prefix(file.size());
  const std::size_t q = line.find('"');
  if (q == std::string_view::npos || line.substr(q).rfind(at, 0) != 0) return std::nullopt;
  const std::string_view path = line.substr(0, q);
  std::string_view rest = line.substr(q + at.size());
  const std::size_t in = rest.find(" in ");
  if (in == std::string_view::npos || !digits(rest.substr(0, in))) return std::nullopt;
  return std::string(path) + ":" + std::string(rest.substr(0, in)) + " in " +
         std::string(rest.substr(in + 4));
}

/// eu-stack's "TID 42:" or gdb's "Thread N (... LWP 42 ...)": the thread id.
std::optional<long> thread_line(std::string_view line) {
  if (line.starts_with("TID ")) {
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && colon > 4 && digits(line.substr(4, colon - 4)) &&
        colon - 4 <= 9)
      return std::stol(std::string(line.substr(4, colon - 4)));
    return std::nullopt;
  }
  if (!line.starts_with("Thread ")) return std::nullopt;
  const std::size_t sp = line.find(' ', 7);
  if (sp == std::string_view::npos || !digits(line.substr(7, sp - 7))) return std::nullopt;
  const std::size_t lwp = line.find("LWP ", sp);
  if (lwp == std::string_view::npos) return std::nullopt;
  std::size_t e = lwp + 4;
  while (e < line.size() && e - lwp - 4 < 9 && line[e] >= '0' && line[e] <= '9') ++e;
  if (e == lwp + 4) return std::nullopt;
  return std::stol(std::string(line.substr(lwp + 4, e - lwp - 4)));
}

/// A native frame "#0  0x00007f... in func (args) at file:line": the function.
std::optional<std::string> native_frame(std::string_view line) {
  if (!line.starts_with("#")) return std::nullopt;
  std::size_t i = 1;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  if (i == 1 || i >= line.size() || (line[i] != ' ' && line[i] != '\t')) return std::nullopt;
  auto skip_space = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  };
  skip_space();
  std::string_view address;
  if (line.substr(i).starts_with("0x")) {
    std::size_t j = i + 2;
    while (j < line.size() && std::isxdigit(static_cast<unsigned char>(line[j]))) ++j;
    address = line.substr(i, j - i);
    if (j < line.size() && (line[j] == ' ' || line[j] == '\t')) {
      i = j;
      skip_space();
    }
  }
  if (line.substr(i).starts_with("in ") || line.substr(i).starts_with("in\t")) {
    i += 2;
    skip_space();
  }
  std::size_t e = i;
  while (e < line.size() && line[e] != ' ' && line[e] != '\t' && line[e] != '(') ++e;
  if (e == i) return address.empty() ? std::nullopt : std::optional<std::string>(address);
  // gdb's "in ?? ()": no symbol; the address, for name_addresses.
  if (line.substr(i, e - i) == "??" && !address.empty()) return std::string(address);
  return std::string(line.substr(i, e - i));
}

/// "0x55c7b7c374af" -> its value; nullopt unless the whole text is one.
std::optional<unsigned long long> hex_value(std::string_view t, bool prefixed) {
  if (prefixed) {
    if (!t.starts_with("0x")) return std::nullopt;
    t.remove_prefix(2);
  }
  if (t.empty() || t.size() > 16) return std::nullopt;
  unsigned long long v = 0;
  for (char c : t) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 16 + static_cast<unsigned long long>(std::isdigit(static_cast<unsigned char>(c))
                                                     ? c - '0'
                                                     : std::tolower(c) - 'a' + 10);
  }
  return v;
}

/// libc's waits and the thread machinery: not where a rank is.
bool wait_primitive(std::string_view f) {
  if (f.find("+0x") != std::string_view::npos) return false;  // a file's own code (name_addresses)
  static constexpr std::string_view kPrefixes[] = {
      "__",    "_dl_",   "syscall",      "epoll_wait",   "poll",
      "ppoll", "select", "pselect",      "nanosleep",    "clock_nanosleep",
      "sleep", "usleep", "pthread_cond", "pthread_join", "futex",
      "read",  "recv",   "accept",       "start_thread", "clone"};
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](std::string_view p) { return f.starts_with(p); });
}

}  // namespace

std::vector<std::string> python_frames(const std::string& dump) {
  std::vector<std::vector<std::string>> threads;
  std::size_t current = static_cast<std::size_t>(-1);
  each_line(dump, [&](std::string_view line) {
    if (line.starts_with("Thread 0x") || line.starts_with("Current thread 0x")) {
      threads.emplace_back();
      if (line.starts_with("Current")) current = threads.size() - 1;
      return;
    }
    if (threads.empty() || threads.back().size() >= 256) return;
    if (auto f = python_frame(line)) threads.back().push_back(std::move(*f));
  });
  for (const auto& t : threads)  // the main thread runs the script's <module>
    if (!t.empty() && t.back().ends_with(" in <module>")) return t;
  if (current < threads.size()) return threads[current];
  return threads.empty() ? std::vector<std::string>{} : threads.front();
}

std::vector<std::string> native_frames(const std::string& text, pid_t tid) {
  // eu-stack: "TID 42:" then "#0  0x00007f... func"; gdb: "Thread N (... LWP 42 ...)"
  // then "#0  0x... in func (args) at file:line".
  std::vector<std::string> out;
  bool mine = false;
  each_line(text, [&](std::string_view line) {
    if (auto t = thread_line(line)) {
      mine = *t == tid;
      return;
    }
    if (mine && out.size() < 256)
      if (auto f = native_frame(line)) out.push_back(std::move(*f));
  });
  return out;
}

void name_addresses(std::vector<std::string>& frames, const std::string& maps) {
  struct Map {
    unsigned long long start, end, offset;
    std::string file;
  };
  std::vector<Map> mapped;
  each_line(maps, [&](std::string_view line) {
    // "55c7b7c33000-55c7b7c39000 r-xp 00002000 08:01 123    /usr/bin/sleep"
    if (mapped.size() >= 4096) return;
    std::vector<std::string_view> f;
    std::size_t i = 0;
    while (i < line.size() && f.size() < 6) {
      while (i < line.size() && line[i] == ' ') ++i;
      std::size_t e = f.size() == 5 ? line.size() : line.find(' ', i);
      if (e == std::string_view::npos) e = line.size();
      if (e > i) f.push_back(line.substr(i, e - i));
      i = e;
    }
    if (f.size() < 6 || f[5].empty() || f[5].front() != '/') return;
    const auto dash = f[0].find('-');
    if (dash == std::string_view::npos) return;
    auto a = hex_value(f[0].substr(0, dash), false), b = hex_value(f[0].substr(dash + 1), false),
         off = hex_value(f[2], false);
    if (a && b && off && *a < *b) mapped.push_back({*a, *b, *off, std::string(f[5])});
  });
  for (auto& frame : frames) {
    const auto at = hex_value(frame, true);
    if (!at) continue;
    for (const auto& m : mapped)
      if (*at >= m.start && *at < m.end) {
        char off[24];
        std::snprintf(off, sizeof off, "+0x%llx", *at - m.start + m.offset);
        frame = base(m.file) + off;
        break;
      }
  }
}

bool library_frame(const std::string& frame) { return in_library(frame); }

void summarise(RankStack& s) {
  if (s.frames.empty()) {
    s.where = s.error.empty() ? "no stack" : "no stack (" + s.error + ")";
    return;
  }
  if (s.source == "python") {
    const std::string& top = s.frames.front();
    std::string own;
    for (const auto& f : s.frames)
      if (!in_library(f)) {
        own = short_frame(f);
        break;
      }
    // Waiting for another only by name (wait_frames.h): an import, a load, a
    // compile or a sleep inside torch is the rank's own work.
    FrameWait w = python_wait(s.frames);
    bool from_native = false;
    if (w.kind == WaitKind::none && !s.native.empty()) {
      w = native_wait(s.native);  // store.wait(), work.wait(), .item() from its own code
      from_native = w.kind != WaitKind::none;
    }
    if (w.kind == WaitKind::in_group && s.sequence && *s.sequence < 0)
      w.kind = WaitKind::none;  // no process group: backward or a sync waits on nobody
    s.waiting = w.kind != WaitKind::none;
    if (s.waiting && from_native) {
      s.where = "wait in " + w.call + (own.empty() ? "" : " from " + own);
    } else if (s.waiting) {
      const auto in = top.rfind(" in ");
      s.where = "wait in " + w.call + " (" + short_frame(top.substr(0, in)) + ")" +
                (own.empty() ? "" : " from " + own);
    } else {
      s.where = "in " + (own.empty() ? short_frame(top) : own);
    }
    return;
  }
  // Native: the first frame that is not a libc wait primitive says where.
  std::string where;
  for (const auto& f : s.frames)
    if (!wait_primitive(f)) {
      where = f;
      break;
    }
  if (where.empty()) where = s.frames.front();
  s.waiting = native_wait(s.frames).kind != WaitKind::none;
  s.where = (s.waiting ? "wait in " : "in ") + where;
}

}  // namespace gpudiag::launch
