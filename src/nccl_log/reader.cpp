// Log input (reader.h): the path walk with loop detection, opening without blocking, and the
// bounded line splitter. The splitter classifies bytes with a 256-entry table and moves whole
// runs of text at a time, so a multi-gigabyte NUL file is skipped at memory speed.
#include "nccl_log/reader.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::nccl_log {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBlock = 256 * 1024;

enum ByteClass : std::uint8_t { kText = 0, kBinary = 1, kNewline = 2 };

constexpr std::array<std::uint8_t, 256> make_classes() {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = kBinary;
  for (int c : {int{'\t'}, int{'\r'}, int{'\v'}, int{'\f'}, 0x1b}) t[c] = kText;  // ESC: colours
  t['\n'] = kNewline;
  t[0x7f] = kBinary;
  return t;
}
constexpr auto kClass = make_classes();

inline std::uint8_t klass(char c) { return kClass[static_cast<unsigned char>(c)]; }

/// Descriptors a shell hands over: `- < file`, `<(zcat job.log.gz)`.
bool shell_descriptor(const std::string& path) {
  return path == "/dev/stdin" || path.starts_with("/dev/fd/") || path.starts_with("/proc/self/fd/");
}

UsageError not_a_file(const std::string& path, unsigned mode) {
  return UsageError("'" + path + "' is " + file_kind(mode) + ", not a regular file",
                    "pass log files or directories; to read a pipe or device use - (gpudiag "
                    "nccl-log - < " +
                        path + ")");
}

class FdSource final : public ByteSource {
 public:
  FdSource(int fd, std::string name, bool owned) : fd_(fd), name_(std::move(name)), owned_(owned) {}
  ~FdSource() override {
    if (owned_) ::close(fd_);
  }
  FdSource(const FdSource&) = delete;
  FdSource& operator=(const FdSource&) = delete;

  std::size_t read(char* buf, std::size_t n) override {
    for (;;) {
      const ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) return static_cast<std::size_t>(r);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {  // a non-blocking stdin: wait for data
        pollfd p{fd_, POLLIN, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      throw UsageError("read error in '" + name_ + "': " + std::strerror(errno),
                       "check the file system");
    }
  }

 private:
  int fd_;
  std::string name_;
  bool owned_;
};

using FileId = std::pair<dev_t, ino_t>;

struct Walk {
  std::set<FileId> dirs, files;
};

/// Every regular file below `root` (whose stat is `root_st`), each directory entered once,
/// sorted by path. The real tree is walked before any directory reached through a symlink,
/// and a file reached both ways keeps its real path, so what is read and the names evidence
/// cites do not depend on the order the directory lists its entries. Returns how many
/// regular files it met, duplicates included.
std::size_t walk(const std::string& root, const struct stat& root_st, Walk& seen,
                 std::vector<std::string>& found) {
  if (!seen.dirs.insert({root_st.st_dev, root_st.st_ino}).second) return 1;  // given twice
  struct Dir {
    fs::path path;
    bool via_link;
  };
  std::vector<Dir> real{{root, false}}, linked;          // linked: not yet marked as seen
  std::map<FileId, std::pair<bool, std::string>> files;  // -> (via a link, path)
  std::size_t regular = 0;
  while (!real.empty() || !linked.empty()) {
    Dir dir;
    if (!real.empty()) {
      dir = std::move(real.back());
      real.pop_back();
    } else {
      dir = std::move(linked.back());
      linked.pop_back();
      struct stat st {};
      if (::stat(dir.path.c_str(), &st) != 0) continue;
      if (!seen.dirs.insert({st.st_dev, st.st_ino}).second) {
        spdlog::warn("nccl-log: skipping '{}': a directory already read (a symlink loop?)",
                     dir.path.string());
        continue;
      }
    }
    std::error_code ec;
    fs::directory_iterator it(dir.path, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const auto& p = it->path();
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0) {  // a dangling link, or a link chain that loops
        spdlog::warn("nccl-log: skipping '{}': {}", p.string(), std::strerror(errno));
        continue;
      }
      std::error_code link_ec;
      const bool via_link = dir.via_link || it->is_symlink(link_ec);
      if (S_ISDIR(st.st_mode)) {
        if (via_link)
          linked.push_back({p, true});
        else if (seen.dirs.insert({st.st_dev, st.st_ino}).second)
          real.push_back({p, false});
      } else if (S_ISREG(st.st_mode)) {
        ++regular;
        auto [at, added] = files.try_emplace({st.st_dev, st.st_ino}, via_link, p.string());
        if (!added && std::make_pair(via_link, p.string()) < at->second)
          at->second = {via_link, p.string()};
      } else {
        spdlog::warn("nccl-log: skipping '{}': it is {}, not a regular file", p.string(),
                     file_kind(st.st_mode));
      }
    }
    if (ec)
      throw UsageError("cannot list '" + dir.path.string() + "': " + ec.message(),
                       "check its permissions");
  }
  std::vector<std::string> paths;
  for (const auto& [id, file] : files)
    if (seen.files.insert(id).second) paths.push_back(file.second);
  std::sort(paths.begin(), paths.end());
  found.insert(found.end(), paths.begin(), paths.end());
  return regular;
}

}  // namespace

std::size_t StreamSource::read(char* buf, std::size_t n) {
  in_.read(buf, static_cast<std::streamsize>(n));
  if (in_.bad()) throw UsageError("read error in '" + name_ + "'", "check the file system");
  return static_cast<std::size_t>(in_.gcount());
}

// --- the splitter ---------------------------------------------------------------------------

LineSplitter::LineSplitter(ByteSource& source, std::string name, const InputLimits& limits,
                           std::uint64_t already_read)
    : source_(source),
      name_(std::move(name)),
      limits_(limits),
      already_read_(already_read),
      buf_(kBlock) {}

bool LineSplitter::fill() {
  len_ = source_.read(buf_.data(), buf_.size());
  pos_ = 0;
  bytes_ += len_;
  if (already_read_ + bytes_ > limits_.max_bytes)
    throw UsageError("more than " + human_bytes(limits_.max_bytes) +
                         " of input (--max-input); stopped reading '" + name_ + "'",
                     "pass only the logs of the run, or raise --max-input");
  return len_ > 0;
}

bool LineSplitter::emit(Piece& out, bool whole) {
  gave_piece_ = true;
  out.text = line_;
  out.lineno = lineno_;
  out.whole = whole;
  clear_ = true;
  return true;
}

bool LineSplitter::next(Piece& out) {
  if (clear_) {
    line_.clear();
    clear_ = false;
  }
  for (;;) {
    if (pos_ == len_) {
      if (eof_ || !fill()) {
        eof_ = true;
        if (!line_started_) return false;
        line_started_ = false;  // the last line has no '\n'
        ++lines_;
        if (skipping_ || line_.empty()) {
          dropped_ += !gave_piece_;
          return false;
        }
        return emit(out, !binary_line_);
      }
    }
    const char* p = buf_.data() + pos_;
    const char* end = buf_.data() + len_;
    line_started_ = true;
    switch (klass(*p)) {
      case kNewline: {
        ++pos_;
        ++lines_;
        line_started_ = false;
        const bool keep = !skipping_ && (!binary_line_ || !line_.empty());
        const bool whole = !binary_line_;
        if (!keep && !gave_piece_) ++dropped_;
        skipping_ = binary_line_ = in_run_ = false;
        if (keep) {
          emit(out, whole);
          gave_piece_ = false;
          ++lineno_;
          return true;
        }
        gave_piece_ = false;
        line_.clear();
        ++lineno_;
        continue;
      }
      case kBinary: {
        const char* q = p;
        while (q < end && klass(*q) == kBinary) ++q;
        pos_ += static_cast<std::size_t>(q - p);
        if (!in_run_) ++junk_;
        in_run_ = binary_line_ = true;
        if (!skipping_ && !line_.empty()) return emit(out, false);
        continue;
      }
      default: {
        const char* q = p;
        while (q < end && klass(*q) == kText) ++q;
        const auto n = static_cast<std::size_t>(q - p);
        pos_ += n;
        in_run_ = false;
        if (skipping_) continue;
        if (line_.size() + n > limits_.max_line) {  // too long for a log line: junk, up to its '\n'
          ++junk_;
          skipping_ = true;
          line_.clear();
          continue;
        }
        line_.append(p, n);
      }
    }
  }
}

// --- paths ----------------------------------------------------------------------------------

std::vector<std::string> list_logs(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (auto& f : list_log_files(paths)) out.push_back(std::move(f.path));
  return out;
}

std::vector<LogFile> list_log_files(const std::vector<std::string>& paths) {
  std::vector<LogFile> files;
  bool stdin_too = false;
  Walk seen;
  for (const auto& path : paths) {
    if (path == "-") {  // a pipe: mpirun ... 2>&1 | gpudiag nccl-log -
      stdin_too = true;
      continue;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR)
        throw UsageError("cannot read '" + path + "': no such file or directory",
                         "check the path (NCCL_DEBUG_FILE names end in the host and pid)");
      throw UsageError("cannot read '" + path + "': " + std::strerror(errno),
                       "check the path and its permissions");
    }
    if (S_ISDIR(st.st_mode)) {
      std::vector<std::string> found;
      if (walk(path, st, seen, found) == 0)
        throw UsageError("'" + path + "' is a directory with no files in it",
                         "pass the run directory that holds the NCCL_DEBUG_FILE logs");
      for (auto& f : found) files.push_back({std::move(f), true});
    } else if (S_ISREG(st.st_mode) || shell_descriptor(path)) {
      if (seen.files.insert({st.st_dev, st.st_ino}).second) files.push_back({path, false});
    } else {
      throw not_a_file(path, st.st_mode);
    }
  }
  if (stdin_too) files.insert(files.begin(), LogFile{"<stdin>", false});
  return files;
}

std::unique_ptr<ByteSource> open_log(const std::string& path) {
  if (path == "<stdin>") return std::make_unique<FdSource>(STDIN_FILENO, path, false);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    throw UsageError("cannot read '" + path + "': " + std::strerror(errno),
                     "check its permissions");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || (!S_ISREG(st.st_mode) && !shell_descriptor(path))) {
    ::close(fd);
    throw not_a_file(path, st.st_mode);  // replaced since list_logs looked at it
  }
  // Opened without blocking; read with blocking (a pipe from the shell waits for its writer).
  if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::make_unique<FdSource>(fd, path, true);
}

}  // namespace gpudiag::nccl_log
