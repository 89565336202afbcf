// Taking and grouping the ranks' stacks (stacks.h); reading their frames is in
// stack_frames.cpp.
#include "launch/stacks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
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

}  // namespace

bool catches_signal(pid_t pid, int sig, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    std::string hex = line.substr(7);
    hex.erase(0, hex.find_first_not_of(" \t"));
    if (hex.empty() || hex.size() > 16 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      return false;
    const unsigned long long mask = std::stoull(hex, nullptr, 16);
    return sig >= 1 && sig <= 64 && ((mask >> (sig - 1)) & 1ULL) != 0;
  }
  return false;
}

RankStack take_stack(pid_t pid, const std::string& python_dump) {
  RankStack s;
  // SIGUSR2's default action ends the process: only a rank whose startup file
  // has its handler installed now (not yet starting, not finalizing) is sent it.
  if (!python_dump.empty() && file_size(python_dump) >= 0 && catches_signal(pid, SIGUSR2)) {
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
    s.text = capture(
        {"gdb", "-nx", "-batch", "-p", std::to_string(pid), "-ex", "thread apply all bt"}, 20, ran);
    s.source = "gdb";
    if (!ran) {
      s.source.clear();
      s.error = "neither eu-stack (elfutils) nor gdb is installed";
      return s;
    }
  }
  s.frames = native_frames(s.text, pid);
  // Frames without a symbol are named from the process's mappings (read only then).
  if (std::any_of(s.frames.begin(), s.frames.end(),
                  [](const std::string& f) { return f.rfind("0x", 0) == 0; }))
    name_addresses(s.frames, read_from("/proc/" + std::to_string(pid) + "/maps", 0));
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

std::vector<int> waited_for_ranks(const std::vector<RankStack>& stacks) {
  // Grouped by summary: the ranks of a group that is not waiting and holds at
  // most half the ranks, when some rank waits.
  std::map<std::string, std::pair<std::vector<int>, bool>> groups;
  for (const auto& s : stacks) {
    auto& g = groups[s.where];
    g.first.push_back(s.rank);
    g.second = s.waiting;
  }
  std::vector<int> out;
  bool someone_waits = false;
  for (const auto& [where, g] : groups) {
    someone_waits = someone_waits || g.second;
    if (!g.second && g.first.size() * 2 <= stacks.size())
      out.insert(out.end(), g.first.begin(), g.first.end());
  }
  if (!someone_waits) out.clear();
  std::sort(out.begin(), out.end());
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
  const std::vector<int> waited_for = waited_for_ranks(stacks);
  if (!waited_for.empty()) {
    lines.push_back("the others wait for " +
                    std::string(waited_for.size() == 1 ? "rank " : "ranks ") +
                    format_ranks(waited_for));
  }
  for (const auto& [where, g] : order) {
    if (lines.size() == 9) {
      lines.push_back("... and " + std::to_string(order.size() - 8) +
                      " more groups (see the files)");
      break;
    }
    auto ranks = g.ranks;
    std::sort(ranks.begin(), ranks.end());
    const bool one = ranks.size() == 1;
    std::string who = (one ? "rank " : "ranks ") + format_ranks(ranks);
    if (one)
      who += " [" + clean_text(g.host_of_first) + "-" + std::to_string(g.local_of_first) + "]";
    const std::string verb = where.rfind("wait in ", 0) == 0
                                 ? (one ? "waits" : "wait") + where.substr(4)
                             : where.rfind("in ", 0) == 0 ? (one ? "is " : "are ") + where
                                                          : ": " + where;
    lines.push_back(who + (verb.rfind(":", 0) == 0 ? "" : " ") + clean_text(verb));
  }
  return lines;
}

}  // namespace gpudiag::launch
