// Building and applying the NCCL_DEBUG* environment for per-rank logs (capture.h): names
// checked against NCCL's lists, file names escaped for NCCL's %-substitution.
#include "nccl_log/capture.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::nccl_log {

namespace fs = std::filesystem;

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string checked_level(const std::string& level) {
  auto v = upper(trim(level));
  if (v == "INFO" || v == "TRACE") return v;
  throw UsageError("unknown NCCL debug level '" + level + "'", "use info or trace");
}

std::string checked_subsys(const std::vector<std::string>& subsys) {
  if (subsys.empty()) return "INIT,BOOTSTRAP,ENV,NET";
  const auto& known = known_subsystems();
  std::vector<std::string> out;
  for (const auto& item : subsys) {
    for (const auto& part : split(item, ',')) {
      auto name = upper(trim(part));
      if (name.empty()) continue;
      // NCCL accepts "^A,B" to mean everything but A and B; the caret leads the list.
      std::string bare = name[0] == '^' && out.empty() ? name.substr(1) : name;
      if (std::find(known.begin(), known.end(), bare) == known.end())
        throw UsageError("unknown NCCL_DEBUG_SUBSYS name '" + std::string(trim(part)) + "'",
                         "use a comma-separated list of " + join(known, ","));
      out.push_back(name);
    }
  }
  if (out.empty()) return "INIT,BOOTSTRAP,ENV,NET";
  return join(out, ",");
}

/// As NCCL names a host in %h: up to the first '.', '/' and '%' turned into '-'.
std::string host_for_file(std::string host) {
  host = host.substr(0, host.find('.'));
  for (auto& c : host)
    if (c == '/' || c == '%' || std::isspace(static_cast<unsigned char>(c))) c = '-';
  return host;
}

/// NCCL_DEBUG_FILE treats '%' as an escape: a literal one is written "%%".
std::string escape_percent(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

fs::path absolute_run_dir(const fs::path& dir) {
  if (dir.empty()) throw UsageError("no NCCL log run directory given", "pass a directory path");
  if (dir.string().front() == '~')
    throw UsageError("NCCL does not expand '~' in NCCL_DEBUG_FILE ('" + dir.string() + "')",
                     "give an absolute path, e.g. $HOME/...");
  std::error_code ec;
  auto abs = fs::absolute(dir, ec);
  if (ec) throw UsageError("cannot resolve '" + dir.string() + "': " + ec.message());
  return abs.lexically_normal();
}

}  // namespace

const std::vector<std::string>& known_subsystems() {
  static const std::vector<std::string> names = {
      "INIT",    "COLL",  "P2P",        "SHM",     "NET",  "GRAPH",     "TUNING",
      "ENV",     "ALLOC", "CALL",       "PROXY",   "NVLS", "BOOTSTRAP", "REG",
      "PROFILE", "RAS",   "ALLOC_HOST", "DESTROY", "ALL"};
  return names;
}

CapturePlan prepare_capture(const CaptureRequest& request) {
  CapturePlan plan;
  auto level = checked_level(request.level);
  auto subsys = checked_subsys(request.subsys);
  plan.run_dir = absolute_run_dir(request.run_dir);

  std::error_code ec;
  for (fs::path d = plan.run_dir; !d.empty() && !fs::exists(d, ec); d = d.parent_path()) {
    plan.created = d;
    if (d == d.root_path()) break;
  }
  fs::create_directories(plan.run_dir, ec);
  if (ec || !fs::is_directory(plan.run_dir))
    throw UsageError("cannot create NCCL log directory '" + plan.run_dir.string() +
                         "': " + (ec ? ec.message() : "a file of that name exists"),
                     "pick a directory you can write, on a file system all nodes share");
  if (::access(plan.run_dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError("cannot write to NCCL log directory '" + plan.run_dir.string() +
                         "': " + std::strerror(errno),
                     "pick a directory you can write");

  bool explicit_name = !request.host.empty() && request.pid > 0;
  std::string name = "nccl.";
  if (request.rank >= 0) name += "rank" + std::to_string(request.rank) + ".";
  std::string dir = escape_percent(plan.run_dir.string());
  if (explicit_name) {
    name += host_for_file(request.host) + "." + std::to_string(request.pid) + ".log";
    plan.log_file = plan.run_dir / name;
    plan.debug_file = dir + "/" + escape_percent(name);
  } else {
    name +=
        (request.host.empty() ? std::string("%h") : escape_percent(host_for_file(request.host))) +
        "." + (request.pid > 0 ? std::to_string(request.pid) : std::string("%p")) + ".log";
    plan.debug_file = dir + "/" + name;
  }
  if (plan.debug_file.size() > 4000)
    throw UsageError("NCCL log path is too long for NCCL (" +
                         std::to_string(plan.debug_file.size()) + " characters)",
                     "use a shorter run directory");

  plan.env = {{"NCCL_DEBUG", level},
              {"NCCL_DEBUG_SUBSYS", subsys},
              {"NCCL_DEBUG_FILE", plan.debug_file},
              // Microseconds on the WARN timestamps order the first WARN across ranks.
              {"NCCL_DEBUG_TIMESTAMP_FORMAT", "[%F %T.%6f] "}};
  return plan;
}

void apply_capture(const CapturePlan& plan) {
  for (const auto& [name, value] : plan.env)
    if (::setenv(name.c_str(), value.c_str(), 1) != 0)
      throw Error(ExitCode::internal, "setenv " + name + " failed: " + std::strerror(errno));
}

void discard_capture(const CapturePlan& plan) {
  if (plan.created.empty()) return;
  for (fs::path d = plan.run_dir;; d = d.parent_path()) {
    if (::rmdir(d.c_str()) != 0 || d == plan.created || d == d.parent_path()) return;
  }
}

std::string not_used_notice(const std::string& backend) {
  return "--nccl-debug: NCCL is not used by the " + backend + " backend; nothing to capture";
}

std::string shell_exports(const CapturePlan& plan) {
  std::string out;
  for (const auto& [name, value] : plan.env) {
    std::string quoted = "'";
    for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += "export " + name + "=" + quoted + "'\n";
  }
  return out;
}

fs::path default_run_dir(const Env& env, std::chrono::system_clock::time_point now) {
  std::string id;
  if (auto job = env.get("SLURM_JOB_ID")) {
    id = *job;
    if (auto step = env.get("SLURM_STEP_ID")) id += "." + *step;
  } else if (auto run = env.get("TORCHELASTIC_RUN_ID")) {
    id = *run;
  } else if (auto ompi = env.get("OMPI_MCA_ess_base_jobid")) {
    id = *ompi;
  } else {
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
    id = buf;
  }
  for (auto& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '-';
  std::error_code ec;
  auto cwd = fs::current_path(ec);
  return (ec ? fs::path(".") : cwd) / ("gpudiag-nccl-" + id);
}

}  // namespace gpudiag::nccl_log
