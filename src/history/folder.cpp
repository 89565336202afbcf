// See folder.h. Plain POSIX calls: the temporary file is opened with O_EXCL
// and O_NOFOLLOW so that a link planted in a shared folder is never written
// through, and the reader opens with O_NOFOLLOW|O_NONBLOCK and checks fstat,
// so a FIFO or a link placed there is skipped, not waited on or followed.
#include "history/folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "util/error.h"
#include "util/text.h"

namespace gpudiag::history {

namespace {

constexpr std::size_t kKeptReasons = 5;

/// A host name as a file name's part: letters, digits, '.', '-', '_' only.
std::string name_part(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 64))
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "unknown" : out;
}

std::string random_hex() {
  std::random_device rd;  // the kernel's getrandom: no two writers share a draw
  std::uint64_t v = (std::uint64_t{rd()} << 32) | rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string errno_text(int e) { return std::strerror(e); }

bool write_all_fd(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

/// The record file `name` in `dir`, or "" with `why` set.
std::string read_capped(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ELOOP ? "a symbolic link" : errno_text(errno);
    return {};
  }
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (static_cast<std::uint64_t>(st.st_size) > kMaxRecordBytes) {
    why = "larger than " + std::to_string(kMaxRecordBytes) + " bytes";
  } else {
    // Read one byte past the cap: a file that grew after fstat is refused too.
    text.resize(kMaxRecordBytes + 1);
    std::size_t got = 0;
    for (;;) {
      ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) why = errno_text(errno);
        break;
      }
      got += static_cast<std::size_t>(n);
      if (got == text.size()) break;
    }
    text.resize(got);
    if (got > kMaxRecordBytes) why = "larger than " + std::to_string(kMaxRecordBytes) + " bytes";
  }
  ::close(fd);
  if (!why.empty()) return {};
  if (text.empty()) why = "empty";
  return text;
}

}  // namespace

std::string record_name(const Record& r, int pid, const std::string& hex) {
  std::string stamp;
  for (char c : r.time)
    if (c != '-' && c != ':') stamp += c;  // 2026-12-02T20:31:07Z -> 20261202T203107Z
  return stamp + "-" + name_part(r.host) + "-" + std::to_string(pid) + "-" + hex + ".json";
}

std::string write_record(const std::string& dir, const Record& r) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create the folder " + clean_text(dir) + ": " + ec.message();
  const std::string name = record_name(r, static_cast<int>(::getpid()), random_hex());
  const std::string final_path = dir + "/" + name;
  const std::string tmp_path = dir + "/." + name + ".tmp";
  const std::string text = to_json(r).dump() + "\n";
  const int fd =
      ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create a record in " + clean_text(dir) + ": " + errno_text(errno);
  // fchmod: the umask may be stricter, and other users' readers must read it.
  (void)::fchmod(fd, 0644);
  const bool ok = write_all_fd(fd, text) && ::fsync(fd) == 0;
  const int write_errno = errno;
  if (::close(fd) != 0 || !ok) {
    ::unlink(tmp_path.c_str());
    return "cannot write a record in " + clean_text(dir) + ": " + errno_text(write_errno);
  }
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp_path.c_str());
    return "cannot name a record in " + clean_text(dir) + ": " + errno_text(e);
  }
  // The folder's entry on disk too, where the file system allows (best effort).
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

std::string write_records(const std::string& dir, const std::vector<Record>& records) {
  std::string first;
  for (const auto& r : records)
    if (auto why = write_record(dir, r); !why.empty() && first.empty()) first = why;
  return first;
}

Folder read_folder(const std::string& dir, const ReadLimits& limits) {
  DIR* d = ::opendir(dir.c_str());
  if (!d)
    throw UsageError("history " + clean_text(dir) + ": " + errno_text(errno),
                     "give the folder passed to --history (or GPUDIAG_HISTORY)");
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.empty() || n[0] == '.' || !n.ends_with(".json")) continue;  // temporary, or not ours
    names.push_back(std::move(n));
  }
  ::closedir(d);
  // Names start with the time: the newest are the last.
  std::sort(names.begin(), names.end());
  Folder f;
  if (names.size() > limits.max_files) {
    f.not_read = names.size() - limits.max_files;
    names.erase(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(f.not_read));
  }
  for (const auto& n : names) {
    std::string why;
    std::string text = read_capped(dir + "/" + n, why);
    std::optional<Record> r;
    if (why.empty()) r = parse_record(text, why);
    if (!r) {
      ++f.skipped;
      if (f.skipped_why.size() < kKeptReasons) f.skipped_why.push_back(clean_text(n) + ": " + why);
      continue;
    }
    f.records.push_back(std::move(*r));
  }
  std::stable_sort(f.records.begin(), f.records.end(),
                   [](const Record& a, const Record& b) { return a.time < b.time; });
  return f;
}

}  // namespace gpudiag::history
