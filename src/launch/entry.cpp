// torchrun's entry points and child variables (entry.h).
#include "launch/entry.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <regex>

#include "launch/child.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::launch {

namespace {

bool regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string forms(const std::vector<std::string>& subcommands) {
  std::vector<std::string> runnable;
  for (const auto& s : subcommands)
    if (s != "launch") runnable.push_back(s);
  return "gpudiag launch [options] SCRIPT.py [args] | -m MODULE [args] | --no-python PROGRAM "
         "[args] | -- SUBCOMMAND (" +
         join(runnable, ", ") + ")";
}

/// Major and minor of "2.11.0+cu130" -> {2, 11}; {-1, -1} when unreadable.
std::pair<int, int> major_minor(const std::string& v) {
  int major = -1, minor = -1;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2) return {-1, -1};
  return {major, minor};
}

}  // namespace

namespace {

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

/// The interpreter named by the shebang of `torchrun` on PATH ("" none).
std::string torchrun_interpreter(const Env& env) {
  for (const auto& dir : split(env.get_or("PATH", "/usr/local/bin:/usr/bin:/bin"), ':')) {
    const std::string t = (dir.empty() ? std::string(".") : dir) + "/torchrun";
    if (!executable_file(t)) continue;
    std::ifstream f(t);
    std::string line;
    if (!std::getline(f, line) || line.rfind("#!", 0) != 0 || line.size() > 4096) return "";
    std::string interp = line.substr(2);
    interp.erase(0, interp.find_first_not_of(" \t"));
    interp = interp.substr(0, interp.find_first_of(" \t"));
    return executable_file(interp) ? interp : "";
  }
  return "";
}

}  // namespace

std::string python_interpreter(const Env& env, std::string* why) {
  auto say = [&](const std::string& w) {
    if (why) *why = w;
  };
  if (auto p = env.get("PYTHON_EXEC"); p && !p->empty()) {
    say("PYTHON_EXEC");
    return find_program(*p, env);
  }
  // torchrun runs its children with its own interpreter (sys.executable):
  // the one its launcher script names is the one that has torch.
  if (auto t = torchrun_interpreter(env); !t.empty()) {
    say("the interpreter of torchrun on PATH");
    return t;
  }
  // Else the first python3 on PATH that has torch installed (a pyenv or
  // conda shim first on PATH may have none), then the first python3.
  for (const auto& dir : split(env.get_or("PATH", "/usr/local/bin:/usr/bin:/bin"), ':')) {
    const std::string p = (dir.empty() ? std::string(".") : dir) + "/python3";
    if (executable_file(p) && !torch_version_for(p).empty()) {
      say("the first python3 on PATH with torch");
      return p;
    }
  }
  say("the first python3 on PATH (none has torch)");
  return find_program("python3", env);
}

namespace {
/// python_interpreter(), said at info level (--log-level info) with why.
std::string chosen_python(const Env& env) {
  std::string why;
  std::string p = python_interpreter(env, &why);
  spdlog::info("launch: the ranks run {} ({}; PYTHON_EXEC chooses another)", p, why);
  return p;
}
}  // namespace

void resolve_entry(LaunchOptions& o, const std::vector<std::string>& subcommands, const Env& env) {
  if (o.command.empty() || o.command.front().empty()) return;  // validate() says what is missing
  if (o.module) {
    if (o.no_python)
      throw UsageError("launch: -m and --no-python cannot go together (a module needs python)",
                       forms(subcommands));
    auto args = o.command;
    o.command = {chosen_python(env), "-u", "-m"};
    o.command.insert(o.command.end(), args.begin(), args.end());
    o.no_gpudiag = o.torch_children = o.python_entry = true;
    return;
  }
  if (o.no_python) {
    o.no_gpudiag = o.torch_children = true;
    return;
  }
  if (o.no_gpudiag) return;  // gpudiag's own flag: a plain program, no torch environment
  const std::string& first = o.command.front();
  for (const auto& s : subcommands)
    if (first == s) return;  // a gpudiag subcommand (validate() refuses "launch")
  if (regular_file(first)) {
    auto args = o.command;
    o.command = {chosen_python(env), "-u"};
    o.command.insert(o.command.end(), args.begin(), args.end());
    o.no_gpudiag = o.torch_children = o.python_entry = true;
    return;
  }
  std::string guess;
  std::size_t best = 3;
  for (const auto& s : subcommands)
    if (s != "launch")
      if (auto d = edit_distance(first, s); d < best) best = d, guess = s;
  throw UsageError("launch: '" + first + "' is neither a file nor a gpudiag subcommand" +
                       (guess.empty() ? "" : " (did you mean '" + guess + "'?)"),
                   forms(subcommands));
}

std::string torch_version_for(const std::string& python) {
  // The interpreter's real file names its version (python3.11); its
  // packages are in <prefix>/lib/python3.X/{site,dist}-packages (venv, conda,
  // /usr/local) or Debian's /usr/lib/python3/dist-packages.
  char real[PATH_MAX];
  if (!::realpath(python.c_str(), real)) return "";
  const std::string path = real;
  std::smatch m;
  static const std::regex name(R"(^(.*)/bin/python(3\.\d+)$)");
  std::vector<std::string> dirs;
  const std::string bin_dir = python.substr(0, python.rfind('/'));
  const std::string venv = bin_dir.substr(0, bin_dir.rfind('/'));  // a venv keeps its own prefix
  if (std::regex_match(path, m, name)) {
    for (const auto& prefix : {venv, m[1].str(), std::string("/usr/local"), std::string("/usr")})
      for (const char* kind : {"site-packages", "dist-packages"})
        dirs.push_back(prefix + "/lib/python" + m[2].str() + "/" + kind);
  }
  // Debian's own interpreters also read its shared dist-packages; any other
  // (a venv, conda, pyenv, a shim) has its own site-packages only.
  if (path.rfind("/usr/bin/python3", 0) == 0) dirs.push_back("/usr/lib/python3/dist-packages");
  static const std::regex line(R"(^__version__\s*=\s*['"]([^'"]{1,64})['"])");
  for (const auto& d : dirs) {
    std::ifstream f(d + "/torch/version.py");
    std::string text;
    for (int n = 0; n < 64 && std::getline(f, text); ++n)
      if (std::regex_search(text, m, line)) return m[1].str();
  }
  return "";
}

std::string async_error_variable(const std::string& torch_version) {
  const auto [major, minor] = major_minor(torch_version);
  return major > 2 || (major == 2 && minor >= 2) ? "TORCH_NCCL_ASYNC_ERROR_HANDLING"
                                                 : "NCCL_ASYNC_ERROR_HANDLING";
}

bool uses_agent_store(const LaunchOptions& o) {
  return o.torch_children && !o.standalone && o.rdzv_backend != "c10d";
}

std::vector<std::pair<std::string, std::string>> torch_variables(const JobInfo& job, int local_rank,
                                                                 const Env& parent) {
  std::vector<std::pair<std::string, std::string>> v{
      {"ROLE_RANK", std::to_string(job.rank_of(local_rank))},
      {"ROLE_NAME", job.role},
      {"ROLE_WORLD_SIZE", std::to_string(job.world_size())},
      {"TORCHELASTIC_RUN_ID", job.run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", job.agent_store ? "True" : "False"},
  };
  const std::string async = job.async_error_variable.empty() ? "NCCL_ASYNC_ERROR_HANDLING"
                                                             : job.async_error_variable;
  v.emplace_back(async, parent.get_or(async, "1"));
  if (!job.omp_num_threads.empty()) v.emplace_back("OMP_NUM_THREADS", job.omp_num_threads);
  if (!job.error_dir.empty())
    v.emplace_back("TORCHELASTIC_ERROR_FILE",
                   job.error_dir + "/" + std::to_string(local_rank) + "/error.json");
  return v;
}

}  // namespace gpudiag::launch
