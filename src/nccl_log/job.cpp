// Reading a job's logs: the files reader.h lists, cut into lines by its LineSplitter and
// streamed into JobBuilder (job.h).
#include "nccl_log/job.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "nccl_log/sniff.h"
#include "util/error.h"

namespace gpudiag::nccl_log {

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

/// "nccl-log: skipped 2 of 5 files, not NCCL logs: 'run/r.json' (a gpudiag report), ...":
/// one line, the first few named.
std::string skipped_notice(const std::vector<SkippedFile>& skipped, std::size_t total) {
  constexpr std::size_t kNamed = 4;
  std::string out = "nccl-log: skipped " + std::to_string(skipped.size()) + " of " +
                    std::to_string(total) + " file" + (total == 1 ? "" : "s") + ", not NCCL logs: ";
  for (std::size_t i = 0; i < skipped.size() && i < kNamed; ++i)
    out += (i ? ", '" : "'") + skipped[i].path + "' (" + skipped[i].why + ")";
  if (skipped.size() > kNamed) out += " and " + std::to_string(skipped.size() - kNamed) + " more";
  return out;
}

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
  auto it = file_positions.find(path);
  return it == file_positions.end() ? files.size() : it->second;
}

ProcessSummary& JobBuilder::process_for(const Line& line, const std::string& file) {
  auto key = process_key(line, file);
  auto [it, inserted] = index_.try_emplace(key, job_.processes.size());
  if (inserted) {
    if (job_.processes.size() >= limits_.max_processes) {
      index_.erase(it);
      throw UsageError("more than " + std::to_string(limits_.max_processes) +
                           " processes (host:pid) in these logs, more than any job gpudiag "
                           "checks; stopped at '" +
                           file + "'",
                       "pass the logs of one job");
    }
    ProcessSummary p;
    p.key = std::move(key);
    p.host = line.host;
    p.pid = line.pid;
    job_.processes.push_back(std::move(p));
    last_file_.push_back(0);
  }
  return touch(it->second, file);
}

ProcessSummary& JobBuilder::touch(std::size_t index, const std::string& file) {
  ProcessSummary& p = job_.processes[index];
  // Once per process and file: listing the file here keeps absorb() from searching the
  // process's file list on every line (quadratic for a process logged in many files).
  if (last_file_[index] != file_serial_) {
    last_file_[index] = file_serial_;
    if (fresh_name_) p.files.push_back(file);
  }
  return p;
}

void JobBuilder::add_stream(std::istream& in, const std::string& name) {
  StreamSource source(in, name);
  add_source(source, name);
}

bool JobBuilder::add_source(ByteSource& bytes, const std::string& name, bool only_if_nccl) {
  SourceFile source{name};
  const std::size_t other_before = job_.other_lines, junk_before = job_.junk_lines;
  std::map<int, std::string> last_key;          // launcher rank -> last process key
  std::map<int, std::vector<Pending>> pending;  // bare version lines waiting for a process
  LineSplitter splitter(bytes, name, limits_, bytes_read_);
  ++file_serial_;
  fresh_name_ = !job_.file_positions.contains(name);
  // A line cut by binary runs comes in several pieces: it is an "other" line when none of
  // them was an NCCL line.
  std::size_t cut_line = 0;
  bool cut_has_nccl = true;
  auto end_cut_line = [&] { job_.other_lines += !cut_has_nccl; };
  Piece piece;
  while (splitter.next(piece)) {
    const std::string_view raw = piece.text;
    const std::size_t lineno = piece.lineno;
    auto line = parse_line(raw);
    std::optional<SideLine> side;
    if (line && is_gpudiag_quote(raw))
      line.reset();  // evidence a gpudiag report quoted
    else if (!line && !is_gpudiag_quote(raw))
      side = parse_side_line(raw);  // PyTorch's watchdog, NCCL DIAG
    if (!piece.whole) {
      if (lineno != cut_line) {
        end_cut_line();
        cut_line = lineno;
        cut_has_nccl = false;
      }
      cut_has_nccl = cut_has_nccl || line.has_value() || side.has_value();
    }
    if (side) {
      ++source.side_lines;
      ++(side->kind == SideKind::diag ? job_.diag_lines : job_.torch_lines);
      side_.add(*side, name, lineno, raw);
      continue;
    }
    if (!line) {
      // NCCL puts a blank line before every WARN; blank lines are not "other" output.
      if (piece.whole && raw.find_first_not_of(" \t\r") != std::string_view::npos)
        ++job_.other_lines;
      continue;
    }
    ++source.nccl_lines;
    ++job_.nccl_lines;
    int stream = line->launcher_rank;
    if (line->level == Level::version && line->pid < 0 && line->host.empty()) {
      if (auto it = last_key.find(stream); it != last_key.end())
        absorb(touch(index_.at(it->second), name), *line, name, lineno, raw);
      else
        pending[stream].push_back({*line, lineno, std::string(raw)});
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
  end_cut_line();
  job_.other_lines += splitter.dropped();  // all binary, or over-long
  source.lines = splitter.lines();
  job_.junk_lines += splitter.junk();
  bytes_read_ += splitter.bytes();
  if (only_if_nccl && source.nccl_lines == 0 && source.side_lines == 0) {  // not a log
    job_.other_lines = other_before;
    job_.junk_lines = junk_before;
    return false;
  }
  job_.file_positions.emplace(name, job_.files.size());
  job_.files.push_back(std::move(source));
  return true;
}

Job JobBuilder::finish() {
  // By rank; processes without a communicator line by their launcher rank, then by name.
  // The keys are computed once per process, not once per comparison.
  auto& ps = job_.processes;
  std::vector<int> rank(ps.size());
  std::vector<std::size_t> order(ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    rank[i] = ps[i].rank() >= 0 ? ps[i].rank() : ps[i].launcher_rank;
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::forward_as_tuple(rank[a] < 0, rank[a], ps[a].host, ps[a].pid, ps[a].key) <
           std::forward_as_tuple(rank[b] < 0, rank[b], ps[b].host, ps[b].pid, ps[b].key);
  });
  std::vector<ProcessSummary> sorted;
  sorted.reserve(ps.size());
  for (std::size_t i : order) sorted.push_back(std::move(ps[i]));
  ps = std::move(sorted);
  job_.torch = side_.finish();
  job_.diag = std::move(side_.diag());
  side_.diag().clear();
  Job out = std::move(job_);
  job_ = Job{};
  index_.clear();
  last_file_.clear();
  return out;
}

Job read_job(const std::vector<std::string>& paths, const InputLimits& limits) {
  if (paths.empty())
    throw UsageError("no log file or directory given", "gpudiag nccl-log FILE|DIR...");
  const std::vector<LogFile> files = list_log_files(paths);
  JobBuilder builder(limits);
  std::vector<SkippedFile> skipped;
  for (const auto& file : files) {
    if (file.path != "<stdin>") {
      const FileVerdict v = judge_file(file.path);
      if (v == FileVerdict::gpudiag_report || (v == FileVerdict::binary && file.in_directory)) {
        skipped.push_back({file.path, verdict_reason(v)});
        continue;
      }
    }
    auto source = open_log(file.path);
    if (!builder.add_source(*source, file.path, file.in_directory))
      skipped.push_back({file.path, "no NCCL line"});
  }
  Job job = builder.finish();
  job.skipped = std::move(skipped);
  if (!job.skipped.empty()) spdlog::warn("{}", skipped_notice(job.skipped, files.size()));
  if (job.nccl_lines == 0 && job.torch_lines == 0 && job.diag_lines == 0) {
    std::string what =
        files.size() == 1 ? "'" + files[0].path + "'" : std::to_string(files.size()) + " files";
    throw UsageError(
        "no NCCL log lines in " + what + " (expected lines like 'host:pid:tid [0] NCCL INFO ...')",
        "run the job with NCCL_DEBUG=INFO and pass its output or its NCCL_DEBUG_FILE files");
  }
  return job;
}

}  // namespace gpudiag::nccl_log
