// read_inputs and friends (files.h).
#include "flight_recorder/files.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <variant>

#include "flight_recorder/json_value.h"
#include "flight_recorder/pickle.h"
#include "util/error.h"
#include "util/file_kind.h"
#include "util/strings.h"

namespace gpudiag::fr {

namespace fs = std::filesystem;

namespace {

using FileId = std::pair<dev_t, ino_t>;

/// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// The whole file, or a FileProblem's kind and detail.
std::variant<std::string, std::pair<std::string, std::string>> slurp(const std::string& path,
                                                                     const Limits& limits) {
  using Problem = std::pair<std::string, std::string>;
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) return Problem{"unreadable", std::string("cannot open: ") + std::strerror(errno)};
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return Problem{"unreadable", "it is " + file_kind(st.st_mode) + ", not a regular file"};
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > limits.max_file_bytes)
    return Problem{"too-large", human_bytes(size) + ", more than the " +
                                    human_bytes(limits.max_file_bytes) +
                                    " a dump may hold (--max-file-size)"};
  std::string data;
  data.resize(static_cast<std::size_t>(size));
  std::size_t got = 0;
  while (got < data.size()) {
    const ssize_t r = ::read(f.fd, data.data() + got, data.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Problem{"unreadable", std::string("read error: ") + std::strerror(errno)};
    if (r == 0) break;  // shrank while being read: what is there is read as it is
    got += static_cast<std::size_t>(r);
  }
  data.resize(got);
  return data;
}

/// The regular files directly in `dir`, sorted; other entries are skipped with a warning.
std::vector<std::string> list_folder(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    struct stat st {};
    const auto p = it->path().string();
    if (::stat(p.c_str(), &st) != 0) {
      spdlog::warn("fr: skipping '{}': {}", p, std::strerror(errno));
      continue;
    }
    if (S_ISREG(st.st_mode))
      out.push_back(p);
    else if (!S_ISDIR(st.st_mode))
      spdlog::warn("fr: skipping '{}': it is {}, not a regular file", p, file_kind(st.st_mode));
  }
  if (ec) throw UsageError("cannot list '" + dir + "': " + ec.message(), "check its permissions");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<int> rank_from_name(std::string_view name) {
  for (std::string_view ext : {".json", ".pkl", ".pickle"})
    if (name.size() > ext.size() && name.ends_with(ext)) {
      name.remove_suffix(ext.size());
      break;
    }
  std::size_t k = name.size();
  while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9') --k;
  const auto digits = name.substr(k);
  if (digits.empty() || digits.size() > 10) return std::nullopt;
  std::int64_t r = 0;
  for (char c : digits) r = r * 10 + (c - '0');
  if (r > std::numeric_limits<int>::max()) return std::nullopt;
  return static_cast<int>(r);
}

RankDump decode_dump(std::string_view bytes, int rank, const std::string& path,
                     const Limits& limits) {
  if (bytes.empty()) throw FormatError("empty");
  const auto first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && bytes[first] == '{')
    return read_dump(decode_json(bytes, limits), rank, path, "json");
  if (static_cast<unsigned char>(bytes[0]) != 0x80)
    throw FormatError("neither a pickle (first byte 0x80) nor JSON ('{')");
  int protocol = 0;
  Value root = decode_pickle(bytes, limits, &protocol);
  return read_dump(root, rank, path, "pickle protocol " + std::to_string(protocol));
}

Inputs read_inputs(const std::vector<std::string>& paths, const Limits& limits) {
  std::vector<std::string> files;
  for (const auto& path : paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      throw UsageError("cannot read '" + path + "': " + std::strerror(errno),
                       "check the path (torch writes ${TORCH_NCCL_DEBUG_INFO_TEMP_FILE}<rank>, "
                       "by default /tmp/nccl_trace_rank_<rank>)");
    if (S_ISDIR(st.st_mode)) {
      auto found = list_folder(path);
      files.insert(files.end(), found.begin(), found.end());
    } else if (S_ISREG(st.st_mode)) {
      files.push_back(path);
    } else {
      throw UsageError("'" + path + "' is " + file_kind(st.st_mode) + ", not a regular file",
                       "pass the dump files, or the folder that holds them");
    }
  }
  Inputs in;
  std::set<FileId> seen;
  std::map<int, std::string> by_rank;
  for (const auto& path : files) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
    FileProblem p{path, rank_from_name(fs::path(path).filename().string()), "", ""};
    if (!p.rank) {
      p.kind = "no-rank";
      p.detail = "its name ends in no rank number (torch names a dump PREFIX<rank>)";
      in.problems.push_back(std::move(p));
      continue;
    }
    if (auto it = by_rank.find(*p.rank); it != by_rank.end()) {
      p.kind = "duplicate-rank";
      p.detail = "rank " + std::to_string(*p.rank) + " was already read from '" + it->second + "'";
      in.problems.push_back(std::move(p));
      continue;
    }
    auto data = slurp(path, limits);
    if (auto* problem = std::get_if<std::pair<std::string, std::string>>(&data)) {
      p.kind = problem->first;
      p.detail = problem->second;
      in.problems.push_back(std::move(p));
      continue;
    }
    const auto& bytes = std::get<std::string>(data);
    try {
      in.dumps.push_back(decode_dump(bytes, *p.rank, path, limits));
      by_rank[*p.rank] = path;
    } catch (const FormatError& e) {
      p.kind = bytes.empty() ? "empty" : e.truncated() ? "truncated" : "not-a-dump";
      p.detail = bytes.empty() ? "an empty file (the rank died, or was killed, before it wrote)"
                               : e.what();
      if (p.detail.starts_with(p.kind + ": ")) p.detail.erase(0, p.kind.size() + 2);
      in.problems.push_back(std::move(p));
    }
  }
  std::sort(in.dumps.begin(), in.dumps.end(),
            [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  return in;
}

}  // namespace gpudiag::fr
