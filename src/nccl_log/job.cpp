// Reading a job's logs: files and directories streamed line by line into JobBuilder (job.h).
#include "nccl_log/job.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <tuple>

#include "util/error.h"

namespace gpudiag::nccl_log {

namespace fs = std::filesystem;

namespace {

std::string process_key(const Line& line, const std::string& file) {
  if (line.pid >= 0)
    return (line.host.empty() ? std::string("?") : line.host) + ":" + std::to_string(line.pid);
  if (line.launcher_rank >= 0) return file + "[" + std::to_string(line.launcher_rank) + "]";
  return file;
}

struct Pending {
  Line line;
  std::size_t lineno;
  std::string raw;
};

}  // namespace

std::set<std::string> Job::hosts() const {
  std::set<std::string> out;
  for (const auto& p : processes)
    if (!p.host.empty()) out.insert(p.host);
  return out;
}

bool Job::multi_node() const {
  if (hosts().size() > 1) return true;
  for (const auto& p : processes) {
    if (p.uses_net()) return true;
    for (const auto& [id, c] : p.comms)
      if (c.nnodes > 1) return true;
  }
  return false;
}

std::size_t Job::file_index(const std::string& path) const {
  for (std::size_t i = 0; i < files.size(); ++i)
    if (files[i].path == path) return i;
  return files.size();
}

ProcessSummary& JobBuilder::process_for(const Line& line, const std::string& file) {
  auto key = process_key(line, file);
  auto it = index_.find(key);
  if (it != index_.end()) return job_.processes[it->second];
  ProcessSummary p;
  p.key = key;
  p.host = line.host;
  p.pid = line.pid;
  job_.processes.push_back(std::move(p));
  index_[key] = job_.processes.size() - 1;
  return job_.processes.back();
}

void JobBuilder::add_stream(std::istream& in, const std::string& name) {
  SourceFile source{name};
  std::map<int, std::string> last_key;          // launcher rank -> last process key
  std::map<int, std::vector<Pending>> pending;  // bare version lines waiting for a process
  std::string raw;
  std::size_t lineno = 0;
  while (std::getline(in, raw)) {
    ++lineno;
    ++source.lines;
    auto line = parse_line(raw);
    if (!line) {
      // NCCL puts a blank line before every WARN; blank lines are not "other" output.
      if (raw.find_first_not_of(" \t\r") != std::string::npos) ++job_.other_lines;
      continue;
    }
    ++source.nccl_lines;
    ++job_.nccl_lines;
    int stream = line->launcher_rank;
    if (line->level == Level::version && line->pid < 0 && line->host.empty()) {
      if (auto it = last_key.find(stream); it != last_key.end())
        absorb(job_.processes[index_[it->second]], *line, name, lineno, raw);
      else
        pending[stream].push_back({*line, lineno, raw});
      continue;
    }
    ProcessSummary& p = process_for(*line, name);
    if (auto it = pending.find(stream); it != pending.end()) {
      for (const auto& v : it->second) absorb(p, v.line, name, v.lineno, v.raw);
      pending.erase(it);
    }
    absorb(p, *line, name, lineno, raw);
    last_key[stream] = p.key;
  }
  // Version lines with no process line after or before them (NCCL_DEBUG=VERSION output).
  for (auto& [stream, lines] : pending)
    for (const auto& v : lines) absorb(process_for(v.line, name), v.line, name, v.lineno, v.raw);
  job_.files.push_back(std::move(source));
}

Job JobBuilder::finish() {
  // By rank; processes without a communicator line by their launcher rank, then by name.
  auto order = [](const ProcessSummary& p) {
    int r = p.rank() >= 0 ? p.rank() : p.launcher_rank;
    return std::make_tuple(r < 0, r, p.host, p.pid, p.key);
  };
  std::sort(job_.processes.begin(), job_.processes.end(),
            [&](const auto& a, const auto& b) { return order(a) < order(b); });
  Job out = std::move(job_);
  job_ = Job{};
  index_.clear();
  return out;
}

Job read_job(const std::vector<std::string>& paths) {
  if (paths.empty())
    throw UsageError("no log file or directory given", "gpudiag nccl-log FILE|DIR...");
  std::vector<std::string> files;
  bool stdin_too = false;
  for (const auto& path : paths) {
    if (path == "-") {  // a pipe: mpirun ... 2>&1 | gpudiag nccl-log -
      stdin_too = true;
      continue;
    }
    std::error_code ec;
    auto st = fs::status(path, ec);
    if (ec || !fs::exists(st))
      throw UsageError("cannot read '" + path + "': no such file or directory",
                       "check the path (NCCL_DEBUG_FILE names end in the host and pid)");
    if (fs::is_directory(st)) {
      std::vector<std::string> found;
      fs::recursive_directory_iterator it(path, fs::directory_options::follow_directory_symlink,
                                          ec);
      for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec)) found.push_back(it->path().string());
      if (ec)
        throw UsageError("cannot list '" + path + "': " + ec.message(), "check its permissions");
      if (found.empty())
        throw UsageError("'" + path + "' is a directory with no files in it",
                         "pass the run directory that holds the NCCL_DEBUG_FILE logs");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(st) || fs::is_fifo(st) || fs::is_character_file(st)) {
      files.push_back(path);
    } else {
      throw UsageError("'" + path + "' is not a file or directory",
                       "pass log files or directories");
    }
  }
  JobBuilder builder;
  if (stdin_too) {
    builder.add_stream(std::cin, "<stdin>");
    files.insert(files.begin(), "<stdin>");
  }
  for (const auto& file : files) {
    if (file == "<stdin>") continue;
    std::ifstream in(file, std::ios::binary);
    if (!in)
      throw UsageError("cannot read '" + file + "': " + std::strerror(errno),
                       "check its permissions");
    builder.add_stream(in, file);
    if (in.bad()) throw UsageError("read error in '" + file + "'", "check the file system");
  }
  Job job = builder.finish();
  if (job.nccl_lines == 0) {
    std::string what =
        files.size() == 1 ? "'" + files[0] + "'" : std::to_string(files.size()) + " files";
    throw UsageError(
        "no NCCL log lines in " + what + " (expected lines like 'host:pid:tid [0] NCCL INFO ...')",
        "run the job with NCCL_DEBUG=INFO and pass its output or its NCCL_DEBUG_FILE files");
  }
  return job;
}

}  // namespace gpudiag::nccl_log
