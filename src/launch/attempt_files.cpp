// Where an attempt's files go (attempt.h): the rank logs in torchrun's
// layout under --log-dir (DIR/<run id>_<launch id>/attempt_<k>/<local rank>/),
// a private folder of this user's for a torch program's error files and
// flight recorder when no --log-dir is given, and the launcher's own lines
// on stderr.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "launch/attempt.h"
#include "util/error.h"
#include "util/file_out.h"

namespace gpudiag::launch {

void launcher_say(const std::string& message) {
  std::string line = "gpudiag launch: " + message + "\n";
  (void)!::write(2, line.data(), line.size());
}

int LogPlan::to_files(int local) const {
  const auto& o = *options;
  const auto l = static_cast<std::size_t>(local);
  int mask = (o.tee.empty() ? 0 : o.tee[l]) | (o.redirects.empty() ? 0 : o.redirects[l]);
  return o.tee.empty() && o.redirects.empty() ? kStdOut | kStdErr : mask;
}

int LogPlan::console_only_not(int local) const {
  return options->redirects.empty() ? 0 : options->redirects[static_cast<std::size_t>(local)];
}

std::shared_ptr<LogFile> open_log(const std::string& dir, const char* name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto path = dir + "/" + name;
  net::Fd fd(open_own_file(path));
  if (!fd)
    throw UsageError("launch: cannot write the rank log " + path + ": " + std::strerror(errno),
                     "give --log-dir a folder this user may write");
  return std::make_shared<LogFile>(std::move(fd));
}

std::string private_folder() {
  const char* t = std::getenv("TMPDIR");
  std::string base = t && t[0] == '/' && std::strlen(t) < 3000 ? t : "/tmp";
  std::string tmpl = base + "/gpudiag-launch-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  if (!::mkdtemp(name.data()))
    throw Error(ExitCode::internal,
                "launch: cannot make a folder in " + base + ": " + std::strerror(errno),
                "set TMPDIR to a writable folder");
  return name.data();
}

std::string flight_recorder_prefix(const JobInfo& job) {
  const std::string dir = job.error_dir + "/flight-recorder";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return dir + "/nccl_trace_rank_";
}

LogPlan plan_logs(const LaunchOptions& o, const JobInfo& first) {
  LogPlan plan{{}, &o, {}};
  if (o.log_dir.empty() && o.tee.empty() && o.redirects.empty()) return plan;
  std::string root = o.log_dir;
  if (root.empty()) root = private_folder();
  plan.base = root + "/" + first.run_id + "_" + first.launch_id;
  return plan;
}

std::string error_root(const LogPlan& logs, const JobInfo& job, std::string& made) {
  if (!logs.base.empty()) return logs.base;
  if (made.empty()) made = private_folder() + "/" + job.run_id + "_" + job.launch_id;
  return made;
}

}  // namespace gpudiag::launch
