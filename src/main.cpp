// gpudiag: the subcommand table and the one place errors become exit codes.
//
// main parses the command line (CLI11, with the help formatter of
// cli/help.h), turns any parse error into one line with a hint (a mistyped
// subcommand or option gets "did you mean"), sets up logging, and runs the
// subcommand's Runner, mapping gpudiag::Error to its exit status.
// --log-level is accepted before and after the subcommand; it is exported as
// GPUDIAG_LOG_LEVEL so that `gpudiag launch` hands it to its ranks.
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/help.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"
#include "util/text.h"

namespace {

struct Subcommand {
  const char* name;
  gpudiag::cli::Runner (*setup)(CLI::App&);
};

constexpr Subcommand kSubcommands[] = {
    {"check", gpudiag::cli::setup_check},       {"launch", gpudiag::cli::setup_launch},
    {"bench", gpudiag::cli::setup_bench},       {"scan", gpudiag::cli::setup_scan},
    {"nccl-log", gpudiag::cli::setup_nccl_log}, {"info", gpudiag::cli::setup_info},
    {"sweep", gpudiag::cli::setup_sweep},       {"fr", gpudiag::cli::setup_fr},
    {"ras", gpudiag::cli::setup_ras},           {"history", gpudiag::cli::setup_history},
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

void add_log_level(CLI::App* app, std::string& level) {
  app->add_option("--log-level", level,
                  "diagnostics on stderr: trace|debug|info|warn|error|off (default: "
                  "GPUDIAG_LOG_LEVEL, else SPDLOG_LEVEL, else warn); launch passes it to its ranks")
      ->type_name("LEVEL")
      // The choices are in the description; the option column says LEVEL.
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"})
                  .description(""));
}

/// The first unknown option of a parsed subcommand, with a suggestion:
/// "check: unknown option --bakend, did you mean --backend?". Empty when the
/// extra arguments are not options.
std::string unknown_option(CLI::App& app) {
  std::vector<CLI::App*> apps{&app};
  for (auto* sub : app.get_subcommands()) apps.push_back(sub);
  for (auto* a : apps) {
    for (const auto& arg : a->remaining()) {
      if (!arg.starts_with("--")) continue;
      auto name = arg.substr(0, arg.find('='));
      auto guess = gpudiag::cli::suggest_option(a, name);
      const std::string who = a == &app ? "" : a->get_name() + ": ";
      const std::string help = a == &app ? "gpudiag --help" : "gpudiag " + a->get_name() + " --help";
      return who + "unknown option " + name +
             (guess.empty() ? "" : ", did you mean " + guess + "?") + "; try: " + help;
    }
  }
  return {};
}

/// "all_reduce" when the program was called as all_reduce_perf (any folder,
/// any of nccl-tests' seven names), else nullopt.
std::optional<std::string> nccl_tests_name(const char* argv0) {
  std::string name = argv0 ? argv0 : "";
  name = name.substr(name.rfind('/') + 1);
  if (!name.ends_with("_perf")) return std::nullopt;
  name.resize(name.size() - 5);
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                         "alltoall", "sendrecv"})
    if (name == op) return name;
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpudiag: diagnose multi-GPU networks and find inf/nan in dumped activations"};
  app.formatter(std::make_shared<gpudiag::cli::HelpFormatter>());
  app.set_version_flag("--version", std::string("gpudiag ") + GPUDIAG_VERSION);
  std::string log_level;
  add_log_level(&app, log_level);
  app.require_subcommand(1, 1);
  app.footer("Each subcommand's --help has its options, examples and exit status.");

  std::vector<gpudiag::cli::Runner> runners;
  for (const auto& s : kSubcommands) runners.push_back(s.setup(app));
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    add_log_level(sub, log_level);
    gpudiag::cli::add_help_footer(sub);
  }

  // Called by one of nccl-tests' names (a link: all_reduce_perf -> gpudiag),
  // it is `gpudiag bench all_reduce ...`: the field's scripts run it unchanged.
  std::vector<std::string> as_bench;
  std::vector<char*> bench_argv;
  if (auto op = nccl_tests_name(argv[0])) {
    as_bench = {argv[0], "bench", *op};
    for (int i = 1; i < argc; ++i) as_bench.emplace_back(argv[i]);
    for (auto& a : as_bench) bench_argv.push_back(a.data());
    bench_argv.push_back(nullptr);
    argc = static_cast<int>(as_bench.size());
    argv = bench_argv.data();
  }

  gpudiag::cli::set_command_line(argc, argv);

  if (argc < 2) {  // bare `gpudiag`: the usage, as a usage error
    std::fputs(app.help("gpudiag").c_str(), stderr);
    return static_cast<int>(gpudiag::ExitCode::usage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    if (argv[1][0] != '-' && !is_subcommand(argv[1])) {
      auto guess = suggest(argv[1]);
      std::fprintf(stderr, "gpudiag: unknown subcommand '%s'%s; try: gpudiag --help\n", argv[1],
                   guess.empty() ? "" : (", did you mean '" + guess + "'?").c_str());
      return static_cast<int>(gpudiag::ExitCode::usage);
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      if (auto line = unknown_option(app); !line.empty()) {
        std::fprintf(stderr, "gpudiag: %s\n", line.c_str());
        return static_cast<int>(gpudiag::ExitCode::usage);
      }
    }
    // One line, like every other error: what was wrong and where to look.
    std::string where = is_subcommand(argv[1]) ? std::string(" ") + argv[1] : "";
    std::fprintf(stderr, "gpudiag: %s; try: gpudiag%s --help\n", gpudiag::clean_text(e.what()).c_str(),
                 where.c_str());
    return static_cast<int>(gpudiag::ExitCode::usage);
  }

  try {
    gpudiag::setup_logging(log_level, gpudiag::Env::from_process());
    // The ranks a launcher starts inherit it (see util/log.h).
    if (!log_level.empty()) ::setenv("GPUDIAG_LOG_LEVEL", log_level.c_str(), 1);
    for (std::size_t i = 0; i < std::size(kSubcommands); ++i)
      if (app.got_subcommand(kSubcommands[i].name)) return runners[i]();
    return static_cast<int>(gpudiag::ExitCode::usage);
  } catch (const gpudiag::Error& e) {
    // A message may quote a path, a setting or a name: escaped (util/text.h).
    std::fprintf(stderr, "gpudiag: %s\n", gpudiag::clean_text(e.one_line()).c_str());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gpudiag: out of memory on this host; try: smaller sizes (--mem, --size, "
                         "--max), or fewer ranks per node\n");
    return static_cast<int>(gpudiag::ExitCode::broken);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpudiag: internal error: %s; please report it with the command line\n",
                 gpudiag::clean_text(e.what()).c_str());
    return static_cast<int>(gpudiag::ExitCode::internal);
  }
}
