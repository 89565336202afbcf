#include "launch/child.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "util/deadline.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::launch {

namespace {

/// How long a child that is being destroyed unreaped gets to die after SIGKILL.
constexpr auto kDestroyWait = std::chrono::seconds(2);
/// How long spawn() waits to learn whether execve() worked.
constexpr auto kExecWait = std::chrono::seconds(10);
/// CLOSE_RANGE_CLOEXEC from <linux/close_range.h> (Linux 5.11), spelled out
/// so the build does not depend on recent kernel headers.
constexpr unsigned kCloseRangeCloexec = 1u << 2;

[[noreturn]] void throw_errno(const std::string& what) {
  throw Error(ExitCode::internal, "launch: " + what + ": " + std::strerror(errno));
}

/// A close-on-exec pipe whose ends are not 0, 1 or 2: dup2() onto a
/// descriptor that is already the target would keep its close-on-exec flag.
void make_pipe(net::Fd& read_end, net::Fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2()");
  for (int& fd : fds) {
    if (fd > 2) continue;
    int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    ::close(fd);
    fd = moved;
  }
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  if (!read_end.valid() || !write_end.valid()) throw_errno("fcntl(F_DUPFD_CLOEXEC)");
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

/// Runs in the forked child: only async-signal-safe calls from here to execve().
[[noreturn]] void exec_child(pid_t parent, int devnull, int out, int err, int exec_error,
                             const char* path, char* const argv[], char* const envp[]) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl()
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(err, STDERR_FILENO);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGHUP, SIGQUIT}) ::signal(sig, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
#ifdef SYS_close_range
  // Descriptors someone else in the launcher opened without O_CLOEXEC must not
  // reach the rank. Older kernels lack this; there, O_CLOEXEC is all we have.
  ::syscall(SYS_close_range, 3u, ~0u, kCloseRangeCloexec);
#endif
  ::execve(path, argv, envp);
  int e = errno;
  [[maybe_unused]] auto n = ::write(exec_error, &e, sizeof e);
  ::_exit(127);
}

/// Waits up to `wait` for the execve() report: 0 if it worked, else its errno.
int read_exec_error(int fd, std::chrono::milliseconds wait) {
  auto deadline = Deadline::after(wait);
  int e = 0;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, deadline.poll_ms());
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;  // no word in time: assume it runs; try_reap() will tell
    auto n = ::read(fd, &e, sizeof e);
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(sizeof e) ? e : 0;
  }
}

}  // namespace

ChildProcess ChildProcess::spawn(const SpawnSpec& spec) {
  auto argv = c_strings(spec.argv);
  auto envp = c_strings(spec.envp);
  net::Fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull.valid()) throw_errno("open(/dev/null)");
  net::Fd out_r, out_w, err_r, err_w, exec_r, exec_w;
  make_pipe(out_r, out_w);
  make_pipe(err_r, err_w);
  make_pipe(exec_r, exec_w);

  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork() for '" + spec.path + "'");
  if (pid == 0)
    exec_child(parent, devnull.get(), out_w.get(), err_w.get(), exec_w.get(), spec.path.c_str(),
               argv.data(), envp.data());

  ::setpgid(pid, pid);  // also here, so the group exists before anyone signals it
  ChildProcess child(pid, std::move(out_r), std::move(err_r));
  exec_w.reset();
  if (int e = read_exec_error(exec_r.get(), kExecWait); e != 0) {
    // ~ChildProcess reaps it (it has already exited with status 127).
    throw Error(e == ENOENT || e == EACCES || e == ENOEXEC ? ExitCode::usage : ExitCode::internal,
                "launch: cannot run '" + spec.path + "': " + std::strerror(e));
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(other.reaped_),
      stdout_(std::move(other.stdout_)),
      stderr_(std::move(other.stderr_)) {}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  auto deadline = Deadline::after(kDestroyWait);
  while (!deadline.expired()) {
    pid_t r = ::waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Still not gone (uninterruptible sleep in the kernel): init reaps it later.
}

void ChildProcess::signal(int sig) const {
  if (pid_ <= 0 || reaped_) return;
  if (::kill(-pid_, sig) != 0) ::kill(pid_, sig);
}

std::optional<ExitStatus> ChildProcess::try_reap() {
  if (pid_ <= 0 || reaped_) return std::nullopt;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid == 0)
    return std::nullopt;
  // The rank is a zombie: its pid still reserves the group id, so this kills
  // only what the rank itself left behind.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t r;
  do r = ::waitpid(pid_, &status, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r != pid_) return std::nullopt;
  reaped_ = true;
  return ExitStatus::from_wait_status(status);
}

std::string find_program(const std::string& name, const Env& env) {
  auto executable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    throw UsageError("launch: '" + name + "' is not an executable file",
                     "check the path after '--'");
  }
  for (auto dir : split(env.get_or("PATH", "/usr/local/bin:/usr/bin:/bin"), ':')) {
    auto candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  throw UsageError("launch: program '" + name + "' not found in PATH",
                   "give its full path, or drop --no-gpudiag to run a gpudiag subcommand");
}

}  // namespace gpudiag::launch
