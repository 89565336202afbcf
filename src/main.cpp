// gpudiag: the subcommand table and the one place errors become exit codes.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace {

struct Subcommand {
  const char* name;
  gpudiag::cli::Runner (*setup)(CLI::App&);
};

constexpr Subcommand kSubcommands[] = {
    {"check", gpudiag::cli::setup_check},       {"launch", gpudiag::cli::setup_launch},
    {"bench", gpudiag::cli::setup_bench},       {"scan", gpudiag::cli::setup_scan},
    {"nccl-log", gpudiag::cli::setup_nccl_log}, {"info", gpudiag::cli::setup_info},
};

bool is_subcommand(const std::string& word) {
  for (const auto& s : kSubcommands)
    if (word == s.name) return true;
  return false;
}

/// "gpudiag chek" -> "did you mean 'check'?"; empty when nothing is close.
std::string suggest(const std::string& word) {
  std::string best;
  std::size_t best_d = 3;
  for (const auto& s : kSubcommands) {
    auto d = gpudiag::edit_distance(word, s.name);
    if (d < best_d) best_d = d, best = s.name;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpudiag: diagnose multi-GPU networks and find inf/nan in dumped activations"};
  app.set_version_flag("--version", std::string("gpudiag ") + GPUDIAG_VERSION);
  std::string log_level;
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (default: SPDLOG_LEVEL, else warn)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.require_subcommand(1, 1);

  std::vector<gpudiag::cli::Runner> runners;
  for (const auto& s : kSubcommands) runners.push_back(s.setup(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    if (argc > 1 && argv[1][0] != '-' && !is_subcommand(argv[1])) {
      auto guess = suggest(argv[1]);
      std::fprintf(stderr, "gpudiag: unknown subcommand '%s'%s; try: gpudiag --help\n", argv[1],
                   guess.empty() ? "" : (", did you mean '" + guess + "'?").c_str());
      return static_cast<int>(gpudiag::ExitCode::usage);
    }
    // One line, like every other error: what was wrong and where to look.
    std::string where = argc > 1 && is_subcommand(argv[1]) ? std::string(" ") + argv[1] : "";
    std::fprintf(stderr, "gpudiag: %s; try: gpudiag%s --help\n", e.what(), where.c_str());
    return static_cast<int>(gpudiag::ExitCode::usage);
  }

  gpudiag::setup_logging(log_level);
  try {
    for (std::size_t i = 0; i < std::size(kSubcommands); ++i)
      if (app.got_subcommand(kSubcommands[i].name)) return runners[i]();
    return static_cast<int>(gpudiag::ExitCode::usage);
  } catch (const gpudiag::Error& e) {
    std::fprintf(stderr, "gpudiag: %s\n", e.one_line().c_str());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gpudiag: out of memory on this host; try: smaller sizes (--mem, --size, "
                         "--max), or fewer ranks per node\n");
    return static_cast<int>(gpudiag::ExitCode::broken);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpudiag: internal error: %s; please report it with the command line\n",
                 e.what());
    return static_cast<int>(gpudiag::ExitCode::internal);
  }
}
