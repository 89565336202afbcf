// Taking and grouping the ranks' stacks (stacks.h).
#include "launch/stacks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <map>
#include <cctype>
#include <optional>
#include <string_view>
#include <thread>

#include "launch/summary.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

constexpr std::size_t kMaxText = 256 * 1024;
using Clock = std::chrono::steady_clock;

/// Runs argv, returns its stdout (at most kMaxText), killed after `seconds`.
std::string capture(const std::vector<std::string>& argv, double seconds, bool& ran) {
  ran = false;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "";
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    return "";
  }
  if (pid == 0) {
    ::dup2(fds[1], 1);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  char buf[16384];
  while (out.size() < kMaxText) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ran = !(WIFEXITED(status) && WEXITSTATUS(status) == 127);
  return out.substr(0, kMaxText);
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string read_from(const std::string& path, off_t from) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  std::string out;
  char buf[16384];
  ::lseek(fd, from, SEEK_SET);
  ssize_t n;
  while (out.size() < kMaxText && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  ::close(fd);
  return out;
}

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

}  // namespace

namespace {

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
  if (line.substr(i).starts_with("0x")) {
    std::size_t j = i + 2;
    while (j < line.size() && std::isxdigit(static_cast<unsigned char>(line[j]))) ++j;
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
  if (e == i) return std::nullopt;
  return std::string(line.substr(i, e - i));
}

/// libc's waits and the thread machinery: not where a rank is.
bool wait_primitive(std::string_view f) {
  static constexpr std::string_view kPrefixes[] = {
      "__",     "_dl_",    "syscall", "epoll_wait", "poll",         "ppoll",   "select",
      "pselect", "nanosleep", "clock_nanosleep", "sleep", "usleep", "pthread_cond", "pthread_join",
      "futex",  "read",    "recv",    "accept",     "start_thread", "clone"};
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](std::string_view p) { return f.starts_with(p); });
}

/// Collectives and the frameworks' waits (gpudiag's own ranks included).
bool in_collective(std::string_view f) {
  static constexpr std::string_view kNames[] = {"gloo", "nccl", "Nccl", "MPI_", "PMPI_",
                                                "ompi_", "c10d", "ProcessGroup"};
  if (std::any_of(std::begin(kNames), std::end(kNames),
                  [&](std::string_view n) { return f.find(n) != std::string_view::npos; }))
    return true;
  const std::size_t own = f.find("gpudiag::");
  if (own == std::string_view::npos) return false;
  const std::string_view rest = f.substr(own + 9);
  for (std::string_view w : {"Wait", "wait", "Gather", "gather", "Ring", "ring", "Link", "link",
                             "Store", "store"})
    if (rest.find(w) != std::string_view::npos) return true;
  return false;
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
    // Inside torch (a collective, or autograd running DDP's all-reduce) while
    // its own code is further out: it waits on the framework, not on itself.
    s.waiting = top.find("/torch/") != std::string::npos && in_library(top);
    if (s.waiting) {
      const auto in = top.rfind(" in ");
      const std::string call = in == std::string::npos ? top : top.substr(in + 4);
      s.where = "wait in " + call + " (" + short_frame(top.substr(0, in)) + ")" +
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
  for (const auto& f : s.frames)
    if (in_collective(f)) {
      s.waiting = true;
      break;
    }
  s.where = (s.waiting ? "wait in " : "in ") + where;
}

RankStack take_stack(pid_t pid, const std::string& python_dump) {
  RankStack s;
  if (!python_dump.empty() && file_size(python_dump) >= 0) {
    const off_t before = file_size(python_dump);
    if (::kill(pid, SIGUSR2) == 0) {
      // The dump is written by the rank's signal handler: wait until it has
      // grown and stopped growing (at most 3 s).
      const auto until = Clock::now() + std::chrono::seconds(3);
      off_t last = before;
      auto stable_since = Clock::now();
      while (Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const off_t now = file_size(python_dump);
        if (now != last) last = now, stable_since = Clock::now();
        if (last > before && Clock::now() - stable_since > std::chrono::milliseconds(150)) break;
      }
      if (last > before) {
        s.text = read_from(python_dump, before);
        s.frames = python_frames(s.text);
        s.source = "python";
        if (!s.frames.empty()) return s;
      }
    }
  }
  bool ran = false;
  s.text = capture({"eu-stack", "-p", std::to_string(pid)}, 10, ran);
  s.source = "eu-stack";
  if (!ran || s.text.empty()) {
    s.text = capture({"gdb", "-nx", "-batch", "-p", std::to_string(pid), "-ex",
                      "thread apply all bt"},
                     20, ran);
    s.source = "gdb";
    if (!ran) {
      s.source.clear();
      s.error = "neither eu-stack (elfutils) nor gdb is installed";
      return s;
    }
  }
  s.frames = native_frames(s.text, pid);
  if (s.frames.empty()) s.error = s.source + " read no frames (ptrace not permitted?)";
  return s;
}

std::string encode_stacks(const std::vector<RankStack>& stacks) {
  std::string out;
  for (const auto& s : stacks) {
    auto field = [](const std::string& t) {
      std::string c = clean_text(t).substr(0, 300);
      std::replace(c.begin(), c.end(), '\t', ' ');
      return c;
    };
    out += std::to_string(s.rank) + "\t" + std::to_string(s.local_rank) + "\t" +
           (s.waiting ? "1" : "0") + "\t" + field(s.host) + "\t" + field(s.where) + "\n";
    if (out.size() > 60000) break;
  }
  return out;
}

std::vector<RankStack> decode_stacks(const std::string& text) {
  std::vector<RankStack> out;
  std::size_t at = 0;
  while (at < text.size() && out.size() < 4096) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, std::min<std::size_t>(end - at, 1024));
    at = end + 1;
    std::vector<std::string> f;
    std::size_t p = 0;
    while (f.size() < 5) {
      const std::size_t tab = f.size() == 4 ? std::string::npos : line.find('\t', p);
      f.push_back(line.substr(p, tab == std::string::npos ? std::string::npos : tab - p));
      if (tab == std::string::npos) break;
      p = tab + 1;
    }
    if (f.size() != 5) continue;
    RankStack s;
    char* e1 = nullptr;
    char* e2 = nullptr;
    const long rank = std::strtol(f[0].c_str(), &e1, 10);
    const long local = std::strtol(f[1].c_str(), &e2, 10);
    if (f[0].empty() || *e1 || f[1].empty() || *e2 || rank < 0 || rank > (1 << 24) || local < 0 ||
        local > 4096 || (f[2] != "0" && f[2] != "1"))
      continue;
    s.rank = static_cast<int>(rank);
    s.local_rank = static_cast<int>(local);
    s.waiting = f[2] == "1";
    s.host = clean_text(f[3]);
    s.where = clean_text(f[4]);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> group_stacks(const std::vector<RankStack>& stacks) {
  struct Group {
    std::vector<int> ranks;
    std::string host_of_first;
    int local_of_first = 0;
    bool waiting = false;
  };
  std::map<std::string, Group> groups;
  for (const auto& s : stacks) {
    auto& g = groups[s.where];
    if (g.ranks.empty()) g.host_of_first = s.host, g.local_of_first = s.local_rank;
    g.ranks.push_back(s.rank);
    g.waiting = s.waiting;
  }
  std::vector<std::pair<std::string, Group>> order(groups.begin(), groups.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.waiting != b.second.waiting) return !a.second.waiting;
    return a.second.ranks.size() < b.second.ranks.size();
  });
  std::vector<std::string> lines;
  std::vector<int> waited_for;
  bool someone_waits = false;
  for (const auto& [where, g] : order) {
    someone_waits = someone_waits || g.waiting;
    if (!g.waiting && g.ranks.size() * 2 <= stacks.size())
      waited_for.insert(waited_for.end(), g.ranks.begin(), g.ranks.end());
  }
  if (someone_waits && !waited_for.empty()) {
    std::sort(waited_for.begin(), waited_for.end());
    lines.push_back("the others wait for " + std::string(waited_for.size() == 1 ? "rank " : "ranks ") +
                    format_ranks(waited_for));
  }
  for (const auto& [where, g] : order) {
    if (lines.size() == 9) {
      lines.push_back("... and " + std::to_string(order.size() - 8) + " more groups (see the files)");
      break;
    }
    auto ranks = g.ranks;
    std::sort(ranks.begin(), ranks.end());
    const bool one = ranks.size() == 1;
    std::string who = (one ? "rank " : "ranks ") + format_ranks(ranks);
    if (one) who += " [" + clean_text(g.host_of_first) + "-" + std::to_string(g.local_of_first) + "]";
    const std::string verb = where.rfind("wait in ", 0) == 0 ? (one ? "waits" : "wait") + where.substr(4)
                             : where.rfind("in ", 0) == 0   ? (one ? "is " : "are ") + where
                                                            : ": " + where;
    lines.push_back(who + (verb.rfind(":", 0) == 0 ? "" : " ") + clean_text(verb));
  }
  return lines;
}

}  // namespace gpudiag::launch
