// gpudiag launch: start N ranks of a gpudiag subcommand (or, with
// --no-gpudiag, any program) on this node, torchrun-style. Parses the
// options into launch::LaunchOptions, checks them, and hands them to
// launch::run_launch(); see docs/launch.md. The job's secret (--secret-file,
// GPUDIAG_SECRET, GPUDIAG_SECRET_FILE) is read here, before any rank starts,
// so a file others may read is refused in one line.
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/launch_json.h"
#include "launch/launcher.h"
#include "launch/options.h"
#include "launch/store_host.h"
#include "rendezvous/job_token.h"
#include "util/env.h"
#include "world/host.h"

namespace gpudiag::cli {

Runner setup_launch(CLI::App& app) {
  auto options = std::make_shared<launch::LaunchOptions>();
  auto* sub =
      app.add_subcommand("launch",
                         "Start N ranks of a gpudiag subcommand on this node (torchrun-style): "
                         "gpudiag launch --nproc-per-node N [options] -- SUBCOMMAND [its options]");
  sub->add_option("--nproc-per-node,--nproc_per_node", options->nproc_per_node,
                  "Processes (usually one per GPU) on this node")
      ->capture_default_str();
  sub->add_option("--nnodes", options->nnodes, "Nodes in the job")->capture_default_str();
  sub->add_option("--node-rank,--node_rank", options->node_rank, "This node's rank, 0..nnodes-1")
      ->capture_default_str();
  sub->add_option("--master-addr,--master_addr", options->master_addr,
                  "Address of node rank 0 (default 127.0.0.1; required with --nnodes > 1)");
  sub->add_option("--master-port,--master_port", options->master_port,
                  "Rendezvous port (default: a free port on one node, 29500 on several)");
  sub->add_option("--grace", options->grace_s,
                  "Seconds the other ranks get after the first failure before SIGTERM")
      ->check(Seconds(0, 86400))
      ->capture_default_str();
  sub->add_option("--kill-after", options->kill_after_s,
                  "Seconds from SIGTERM (or a forwarded signal) to SIGKILL")
      ->check(Seconds(0, 86400))
      ->capture_default_str();
  sub->add_option("--timeout", options->timeout_s,
                  "Stop the whole job after this many seconds (0: no limit)")
      ->check(Seconds(0, 30 * 86400))
      ->capture_default_str();
  sub->add_option("--exit-timeout", options->exit_timeout_s,
                  "Seconds a rank may take to exit after printing its status line; then it is "
                  "reported and killed (default: the check's --timeout + 60)")
      ->check(Seconds(0, 30 * 86400));
  auto secret_file = std::make_shared<std::string>();
  sub->add_option("--secret-file", *secret_file,
                  "File holding the job's secret, readable only by its owner (mode 600), the same "
                  "on every node (default: GPUDIAG_SECRET, GPUDIAG_SECRET_FILE, else a random one "
                  "on a single node)");
  auto no_prefix = std::make_shared<bool>(false);
  sub->add_flag("--no-prefix", *no_prefix, "Do not prefix output lines with \"[rankN]: \"");
  sub->add_flag("--no-gpudiag", options->no_gpudiag,
                "Run the program after -- (searched in PATH) instead of a gpudiag subcommand");
  auto json_path = std::make_shared<std::string>();
  add_json_option(sub, *json_path, "when the ranks have ended, write the job's summary", false);
  sub->positionals_at_end();
  sub->add_option("command", options->command,
                  "After --: the gpudiag subcommand and its options (or, with --no-gpudiag, a "
                  "program and its arguments)");

  return [&app, options, no_prefix, secret_file, json_path]() -> int {
    options->prefix = !*no_prefix;
    std::vector<std::string> subcommands;
    for (const auto* s : app.get_subcommands([](CLI::App*) { return true; }))
      subcommands.push_back(s->get_name());
    launch::validate(*options, subcommands);
    // gpudiag ranks meet in a store the launcher serves; a foreign program
    // (--no-gpudiag) may want MASTER_PORT for its own, so it gets none.
    auto env = Env::from_process();
    // The ranks' logs then carry the relay's prefix alone (util/log.h).
    env.set("GPUDIAG_LAUNCH_PREFIX", options->prefix ? "1" : "0");
    auto secret = secret_file->empty()
                      ? job_secret(env)
                      : std::optional(read_secret_file(*secret_file, "--secret-file"));
    launch::StoreHost store_host(short_hostname(), std::move(secret));
    JobRecorder recorder(options->no_gpudiag ? nullptr : &store_host);
    const int status = launch::run_launch(*options, env, &recorder);
    if (json_path->empty()) return status;
    const int json_status =
        emit_json(*json_path, kLaunchSchema, recorder.document(options->command, status));
    return status != 0 ? status : json_status;
  };
}

}  // namespace gpudiag::cli
