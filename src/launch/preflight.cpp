// --preflight (preflight.h): this node's check as a one-node job of this
// binary's own, its two streams drained through poll() into bounded tails,
// its JSON report written into a private folder of its own, its end awaited
// against a deadline; and the verdict drawn from how it ended and what its
// report judged slow.
#include "launch/preflight.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>

#include "launch/child.h"
#include "launch/job.h"
#include "util/deadline.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

constexpr std::size_t kTail = 16 * 1024;
constexpr std::size_t kReasonMax = 300;
constexpr std::size_t kSlowMax = 360;  // the store keeps 400 bytes of a fault

/// A private folder (mkdtemp, mode 0700) for the check's report, removed with
/// what is in it when this goes; "" when none could be made.
struct ReportFolder {
  std::string path;
  explicit ReportFolder(const Env& env) {
    const auto tmp = env.get("TMPDIR");
    const bool usable = tmp && !tmp->empty() && tmp->front() == '/' && tmp->size() < 512;
    std::string templ = (usable ? *tmp : std::string("/tmp")) + "/gpudiag-preflight-XXXXXX";
    if (::mkdtemp(templ.data())) path = templ;
  }
  ReportFolder(const ReportFolder&) = delete;
  ReportFolder& operator=(const ReportFolder&) = delete;
  ~ReportFolder() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", s);
  return buf;
}

/// The last line of `tail` that holds `marker`, from just after it.
std::string last_after(const std::string& tail, const std::string& marker) {
  const auto at = tail.rfind(marker);
  if (at == std::string::npos) return {};
  const auto from = at + marker.size();
  const auto end = tail.find('\n', from);
  return clean_text(tail.substr(from, std::min(end, tail.size()) - from).substr(0, kReasonMax));
}

/// Reads what the non-blocking `fd` has now into `tail`, keeping its last
/// kTail bytes: the bytes read, 0 at its end (or an error), -1 none yet.
ssize_t drain(int fd, std::string& tail) {
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? -1 : 0;
  tail.append(buf, static_cast<std::size_t>(n));
  if (tail.size() > 2 * kTail) tail.erase(0, tail.size() - kTail);
  return n;
}

void say_preflight(const std::string& message) {
  std::string line = "gpudiag launch: " + message + "\n";
  (void)!::write(2, line.data(), line.size());
}

}  // namespace

PreflightVerdict preflight_fault(const PreflightRun& run, PreflightSlow slow) {
  const std::string limit = "--preflight-timeout " + seconds_text(run.timeout_s) + " s";
  const std::string said = !run.check_summary.empty() ? run.check_summary : run.launch_line;
  PreflightVerdict v;
  if (!run.status) {
    v.fault = "preflight: gpudiag check did not end within " + limit + " (its launcher killed " +
              seconds_text(kPreflightSlack) + " s later)";
    v.line = v.fault;
    return v;
  }
  const ExitStatus& s = *run.status;
  const std::string took = seconds_text(static_cast<int>(run.seconds * 10) / 10.0) + " s";
  if (s.ok() && !run.report.slow.empty()) {
    std::string found = join(run.report.slow, "; ");
    if (found.size() > kSlowMax) found = found.substr(0, kSlowMax - 3) + "...";
    if (slow == PreflightSlow::exclude) {
      v.fault = "preflight: slow: " + found;
      v.line = v.fault;
    } else {
      v.line = "preflight: this node passed gpudiag check but is slow: " + found +
               " (--preflight-slow warn: not counted against the node)";
    }
    return v;
  }
  if (s.ok()) {
    v.line = "preflight: this node passed gpudiag check (" + (said.empty() ? "OK" : said) + ", " +
             took + ")";
    if (!run.report.not_judged.empty())
      v.line += "; its speed not judged: " + run.report.not_judged;
    return v;
  }
  if (!s.signaled && (s.value == 2 || s.value == 4)) {
    v.line = "preflight: gpudiag check could not run on this node (" +
             (run.launch_line.empty() ? s.describe() : run.launch_line) +
             "): not counted against the node";
    return v;
  }
  if (!s.signaled && s.value == 3)
    v.fault = "preflight: gpudiag check did not finish within " + limit + " (" +
              (run.launch_line.empty() ? s.describe() : run.launch_line) + ")";
  else
    v.fault = "preflight: gpudiag check found this node broken (" +
              (said.empty() ? "its launcher " + s.describe() : said) + ")";
  v.line = v.fault;
  return v;
}

std::vector<std::string> preflight_arguments(int nproc_per_node, double timeout_s,
                                             const std::string& report) {
  const std::string t = seconds_text(timeout_s);
  std::vector<std::string> args{"launch",
                                "--standalone",
                                "--nproc-per-node",
                                std::to_string(nproc_per_node),
                                "--timeout",
                                t,
                                "--nccl-ras-timeout",
                                "0",
                                "--",
                                "check",
                                "--timeout",
                                t};
  if (!report.empty()) {
    args.push_back("--json");
    args.push_back(report);
  }
  return args;
}

PreflightRun run_preflight(int nproc_per_node, double timeout_s, const Env& env) {
  SpawnSpec spec;
  spec.path = "/proc/self/exe";
  char self[PATH_MAX];
  const auto n = ::readlink(spec.path.c_str(), self, sizeof self - 1);
  spec.argv.push_back(n > 0 ? std::string(self, static_cast<std::size_t>(n)) : "gpudiag");
  const ReportFolder folder(env);
  const std::string report = folder.path.empty() ? "" : folder.path + "/check.json";
  for (auto& a : preflight_arguments(nproc_per_node, timeout_s, report)) spec.argv.push_back(a);
  std::map<std::string, std::string> vars;
  for (const auto& [k, v] : env.all())
    if (k != "GPUDIAG_HISTORY") vars.emplace(k, v);
  spec.envp = to_envp(Env(vars));

  PreflightRun run;
  run.timeout_s = timeout_s;
  const auto started = std::chrono::steady_clock::now();
  ChildProcess child = ChildProcess::spawn(spec);
  net::Fd out = child.take_stdout(), err = child.take_stderr();
  // Never blocked on a pipe that a leftover process still holds open.
  for (const net::Fd* fd : {&out, &err})
    if (*fd) ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  std::string out_tail, err_tail;
  const auto deadline = Deadline::after_seconds(timeout_s + kPreflightSlack);
  bool killed = false;
  for (;;) {
    if (auto s = child.try_reap()) {
      if (!killed) run.status = s;
      break;
    }
    if (deadline.expired() && !killed) {  // its own --timeout did not stop it: we do
      killed = true;
      child.signal(SIGKILL);
    }
    pollfd fds[2] = {{out ? out.get() : -1, POLLIN, 0}, {err ? err.get() : -1, POLLIN, 0}};
    if (::poll(fds, 2, 200) > 0) {
      if (fds[0].revents && drain(out.get(), out_tail) == 0) out = net::Fd();
      if (fds[1].revents && drain(err.get(), err_tail) == 0) err = net::Fd();
    }
  }
  while (out && drain(out.get(), out_tail) > 0) {
  }
  while (err && drain(err.get(), err_tail) > 0) {
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  run.launch_line = last_after(err_tail, "gpudiag launch: ");
  run.check_summary = last_after(out_tail, "]: summary: ");
  if (run.status && run.status->ok())
    run.report = report.empty() ? PreflightReport{false, "no private folder for its report", {}}
                                : read_preflight_report(report);
  return run;
}

std::function<std::string(int)> preflight_for_rounds(int nproc_per_node, double timeout_s, Env env,
                                                     PreflightSlow slow) {
  return [nproc_per_node, timeout_s, env = std::move(env), slow](int round) {
    say_preflight("preflight: gpudiag check of this node (" + std::to_string(nproc_per_node) +
                  " rank(s), at most " + seconds_text(timeout_s) + " s) before round " +
                  std::to_string(round));
    PreflightVerdict v;
    try {
      v = preflight_fault(run_preflight(nproc_per_node, timeout_s, env), slow);
    } catch (const Error& e) {  // it could not start: not the node's fault
      v.line = "preflight: gpudiag check could not start on this node (" + e.one_line() +
               "): not counted against the node";
    }
    say_preflight(v.line);
    return v.fault;
  };
}

}  // namespace gpudiag::launch
