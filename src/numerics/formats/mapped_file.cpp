// MappedFile (see mapped_file.h): stat before open, O_NONBLOCK, and the SIGBUS guard.
//
// The guard's state is a map from each live mapping's start address to its end and path,
// behind a spin lock (an atomic_flag: the handler may take it, and a mutex is not
// async-signal-safe). No code holding the lock touches mapped memory, so a faulting thread
// never holds it; another thread holds it only for a map insert or erase.
#include "numerics/formats/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "util/error.h"

namespace gpudiag::numerics {

namespace {

constexpr const char* kNotAFileRemedy = "pass .safetensors or .npy files or a directory";

struct Region {
  std::uintptr_t end;
  std::string path;
  std::uint64_t dev = 0, ino = 0;  ///< the mapped file's identity, for mapped_source_of
};

std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
// Never freed: the handler may run until the very end of the process.
std::map<std::uintptr_t, Region>* const g_regions = new std::map<std::uintptr_t, Region>;
struct sigaction g_previous {};

class SpinLock {
 public:
  SpinLock() {
    while (g_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~SpinLock() { g_lock.clear(std::memory_order_release); }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;
};

void write_all(const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void write_str(const char* s) { write_all(s, std::strlen(s)); }

/// Gives the signal to whatever handled it before us (by default: die with SIGBUS).
void pass_on(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  // Restore the default and return: the faulting access runs again and the kernel
  // delivers SIGBUS with its default action (for a kill(2), re-raise it).
  ::sigaction(SIGBUS, &g_previous, nullptr);
  if (info->si_code <= 0) ::raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  // si_code > 0: raised by the kernel for a memory access, so si_addr is meaningful.
  if (info->si_code > 0) {
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    SpinLock lock;
    auto it = g_regions->upper_bound(addr);
    if (it != g_regions->begin() && addr < std::prev(it)->second.end) {
      // Async-signal-safe from here on: write(2) and _exit(2), nothing else.
      write_str("gpudiag: ");
      write_str(std::prev(it)->second.path.c_str());
      write_str(
          ": the file changed while being read (it was truncated or rewritten under gpudiag "
          "scan); try: let the writer finish, or scan a copy, and run gpudiag scan again\n");
      ::_exit(static_cast<int>(ExitCode::usage));
    }
  }
  pass_on(sig, info, context);
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

void register_region(const void* addr, std::size_t size, const std::string& path,
                     const struct stat& st) {
  install_handler();
  const auto begin = reinterpret_cast<std::uintptr_t>(addr);
  Region region{begin + size, path, static_cast<std::uint64_t>(st.st_dev),
                static_cast<std::uint64_t>(st.st_ino)};  // allocate before taking the lock
  SpinLock lock;
  g_regions->insert_or_assign(begin, std::move(region));
}

void unregister_region(const void* addr) {
  std::map<std::uintptr_t, Region>::node_type node;  // freed after the lock is released
  SpinLock lock;
  node = g_regions->extract(reinterpret_cast<std::uintptr_t>(addr));
}

UsageError not_a_file(const std::string& path, unsigned mode) {
  return UsageError(path + ": is " + file_kind(mode) + ", not a regular file", kNotAFileRemedy);
}

}  // namespace

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  // stat first: opening a FIFO blocks until a writer comes, opening a device may act on it.
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0)
    throw UsageError(path_ + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw not_a_file(path_, st.st_mode);
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw UsageError(path_ + ": cannot open: " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // replaced since the stat
    ::close(fd);
    throw not_a_file(path_, st.st_mode);
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw UsageError(path_ + ": cannot map the file: " + std::strerror(err));
    addr_ = p;
    register_region(addr_, size_, path_, st);
    ::madvise(addr_, size_, MADV_SEQUENTIAL);
  } else {
    ::close(fd);
  }
}

std::optional<MappedSource> mapped_source_of(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  SpinLock lock;
  auto it = g_regions->upper_bound(addr);
  if (it == g_regions->begin() || addr >= std::prev(it)->second.end) return std::nullopt;
  --it;
  return MappedSource{it->second.path, it->second.dev, it->second.ino, addr - it->first,
                      it->second.end - it->first};
}

MappedFile::~MappedFile() {
  if (!addr_) return;
  unregister_region(addr_);
  ::munmap(addr_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      addr_(std::exchange(other.addr_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

}  // namespace gpudiag::numerics
