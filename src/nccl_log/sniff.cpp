// Judging a file from its first block (sniff.h). The block is read with one non-blocking
// open and a bounded read; the judgement is a few string searches and the line parser over
// at most 64 KiB, so a directory of thousands of files costs little before the real reading.
#include "nccl_log/sniff.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <vector>

#include "nccl_log/line.h"

namespace gpudiag::nccl_log {

namespace {

constexpr std::size_t kHeadBytes = 64 * 1024;
constexpr std::size_t kBinaryProbe = 4096;

bool contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

/// The first `n` lines of `head` that are not blank.
std::vector<std::string_view> first_lines(std::string_view head, std::size_t n) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < head.size() && out.size() < n) {
    auto end = head.find('\n', pos);
    auto line = head.substr(pos, end == std::string_view::npos ? head.npos : end - pos);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) out.push_back(line);
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return out;
}

/// nccl-log's text header, "NCCL logs: 3 processes on 2 hosts (a, b); 3 files, ...", with
/// whatever launcher prefix a rank's output got in front.
bool text_report_header(std::string_view line) {
  auto pos = line.find("NCCL logs: ");
  if (pos == std::string_view::npos) return false;
  auto rest = line.substr(pos + 11);
  std::size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
  return digits > 0 && rest.substr(digits).starts_with(" process") && contains(rest, " host");
}

bool json_report(std::string_view head) {
  auto first = head.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || head[first] != '{') return false;
  for (std::string_view key : {"\"schema\": \"gpudiag", "\"schema\":\"gpudiag", "\"gpudiag\":"})
    if (contains(head, key)) return true;
  // nccl-log's report: every entry of its leading "files" list has "nccl_lines", so the key
  // is in the head however many files the report lists.
  return contains(head, "\"nccl_lines\":");
}

/// NUL together with other control bytes: a binary format. NULs alone may be the zero-filled
/// head of a crashed node's log, which the splitter reads past.
bool binary_head(std::string_view head) {
  auto probe = head.substr(0, kBinaryProbe);
  bool nul = false, control = false;
  for (char ch : probe) {
    auto c = static_cast<unsigned char>(ch);
    if (c == 0)
      nul = true;
    else if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f' &&
              c != 0x1b) ||
             c == 0x7f)
      control = true;
  }
  return nul && control;
}

bool any_nccl_line(std::string_view head) {
  std::size_t pos = 0;
  while (pos < head.size()) {
    auto end = head.find('\n', pos);
    auto line = head.substr(pos, end == std::string_view::npos ? head.npos : end - pos);
    if (line.find('\0') == std::string_view::npos && parse_line(line)) return true;
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return false;
}

}  // namespace

FileVerdict judge_head(std::string_view head) {
  if (json_report(head)) return FileVerdict::gpudiag_report;
  // The header leads the report; a few lines of stderr may come first (`2>&1 > report.txt`).
  for (auto line : first_lines(head, 4))
    if (text_report_header(line)) return FileVerdict::gpudiag_report;
  if (binary_head(head) && !any_nccl_line(head)) return FileVerdict::binary;
  return FileVerdict::log;
}

FileVerdict judge_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return FileVerdict::log;
  struct stat st {};
  std::vector<char> buf;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    buf.resize(kHeadBytes);
    std::size_t got = 0;
    while (got < buf.size()) {
      const ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    buf.resize(got);
  }
  ::close(fd);
  return judge_head(std::string_view(buf.data(), buf.size()));
}

const char* verdict_reason(FileVerdict v) {
  switch (v) {
    case FileVerdict::gpudiag_report:
      return "a gpudiag report";
    case FileVerdict::binary:
      return "binary data";
    case FileVerdict::log:
      break;
  }
  return "an NCCL log";
}

bool is_gpudiag_quote(std::string_view raw) {
  auto pos = raw.find("  log:  ");
  if (pos == std::string_view::npos) return false;
  // FILE:LINE: right after the marker, as render_text writes it.
  auto rest = raw.substr(pos + 8);
  auto sep = rest.find(": ");
  if (sep == std::string_view::npos) return false;
  auto where = rest.substr(0, sep);
  auto colon = where.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == where.size()) return false;
  for (char c : where.substr(colon + 1))
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace gpudiag::nccl_log
