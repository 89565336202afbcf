// gpudiag launch: start N ranks of a gpudiag subcommand (or, with
// --no-gpudiag, any program) on this node, with torchrun's command line
// (--standalone, --rdzv-*, --nnodes MIN:MAX, --nproc-per-node gpu, ...,
// underscore spellings too). Parses the options into launch::LaunchOptions
// (torchrun's value syntaxes through launch/options.h), checks them, and hands
// them to launch::run_launch() with a fresh StoreHost per attempt; see
// docs/launch.md. The job's secret (--secret-file,
// GPUDIAG_SECRET, GPUDIAG_SECRET_FILE) is read here, before any rank starts,
// so a file others may read is refused in one line.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/launch_json.h"
#include "gpu/cuda.h"
#include "history/folder.h"
#include "history/verdicts.h"
#include "launch/entry.h"
#include "launch/launcher.h"
#include "launch/options.h"
#include "launch/preflight.h"
#include "launch/rounds.h"
#include "launch/store_host.h"
#include "store/job_token.h"
#include "settings/job_settings.h"
#include "util/env.h"
#include "util/error.h"
#include "util/fd_write.h"
#include "world/host.h"

namespace gpudiag::cli {

namespace {

/// Options whose torchrun syntax CLI11 cannot check: read after parsing.
struct TorchrunText {
  std::string nproc = "1";
  std::string nnodes = "1";
  std::string rdzv_conf;
  std::string tee;
  std::string redirects;
  std::string local_ranks_filter;
  std::string exit_code = "gpudiag";
  std::string restart_policy = "on-new-error";
  std::string preflight_slow = "exclude";
};

void read_torchrun_text(const TorchrunText& t, launch::LaunchOptions& o) {
  launch::parse_nnodes(t.nnodes, o);
  if (t.nproc == "gpu" || t.nproc == "auto") {
    auto cuda = probe_cuda();
    o.nproc_per_node = launch::parse_nproc(t.nproc, cuda.usable ? cuda.device_count : 0,
                                           static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  } else {
    o.nproc_per_node =
        launch::parse_nproc(t.nproc, 0, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  }
  if (!t.rdzv_conf.empty()) launch::parse_rdzv_conf(t.rdzv_conf, o);
  if (!t.tee.empty()) o.tee = launch::parse_std_spec("--tee", t.tee, o.nproc_per_node);
  if (!t.redirects.empty())
    o.redirects = launch::parse_std_spec("--redirects", t.redirects, o.nproc_per_node);
  if (!t.local_ranks_filter.empty())
    o.console_ranks = launch::parse_local_ranks(t.local_ranks_filter, o.nproc_per_node);
  o.torchrun_exit_code = t.exit_code == "torchrun";
  o.restart_policy = t.restart_policy == "always" ? launch::RestartPolicy::always
                                                  : launch::RestartPolicy::on_new_error;
  o.preflight_slow =
      t.preflight_slow == "warn" ? launch::PreflightSlow::warn : launch::PreflightSlow::exclude;
}

/// --history: this node's record of the job (history/verdicts.h), under the
/// job's token, the one its ranks' records carry (GPUDIAG_TOKEN, the
/// rendezvous id, the SLURM job: launch/job.cpp), so that a launch and the
/// check it runs count as one job. A failure is a warning only.
void record_history(const std::string& dir, const Env& env, const JobRecorder& recorder,
                    int status) {
  JobToken token = read_job_token(env);
  if (!recorder.job().token.empty() && recorder.job().token != token.value)
    token = {recorder.job().token, "the launcher's job token"};
  auto record = history::launch_record(recorder.attempts(), status, short_hostname(),
                                       history::stamp_now(token.value, token.source));
  record.gpus = history::local_gpus();
  record.nics = history::local_nics();
  if (auto why = history::write_record(dir, record); !why.empty())
    write_all(STDERR_FILENO, "gpudiag launch: --history: " + why + "; the job's status stands\n");
}

}  // namespace

Runner setup_launch(CLI::App& app) {
  auto options = std::make_shared<launch::LaunchOptions>();
  auto* sub = app.add_subcommand(
      "launch",
      "Start N ranks of a gpudiag subcommand on this node, with torchrun's command line: "
      "gpudiag launch --nproc-per-node N [options] -- SUBCOMMAND [its options]");
  // torchrun's spellings are taken as they are: value syntaxes (gpu, MIN:MAX,
  // 0:3,1:2, HOST[:PORT], k=v) are parsed by launch/options.h after CLI11.
  auto text = std::make_shared<TorchrunText>();
  sub->add_option("--nproc-per-node,--nproc_per_node", text->nproc,
                  "Processes on this node: N, gpu (visible GPUs), cpu (CPUs) or auto (GPUs if "
                  "any, else CPUs)")
      ->capture_default_str();
  sub->add_option("--nnodes", text->nnodes,
                  "Nodes in the job: N, or MIN:MAX (elastic: wait for MIN, take up to MAX)")
      ->capture_default_str();
  sub->add_option("--node-rank,--node_rank", options->node_rank,
                  "This node's rank, 0..nnodes-1 (default 0; assigned at the rendezvous when "
                  "left out under --rdzv-endpoint)");
  sub->add_option("--master-addr,--master_addr", options->master_addr,
                  "Address of node rank 0 (default 127.0.0.1; required with --nnodes > 1)");
  sub->add_option("--master-port,--master_port", options->master_port,
                  "Rendezvous port (default: a free port on one node, 29500 on several)");
  sub->add_flag("--standalone", options->standalone,
                "One node, its own rendezvous on a free local port");
  sub->add_option("--rdzv-endpoint,--rdzv_endpoint", options->rdzv_endpoint,
                  "HOST[:PORT] where the nodes' launchers meet (port default 29400); node ranks "
                  "are assigned there");
  sub->add_option("--rdzv-backend,--rdzv_backend", options->rdzv_backend,
                  "c10d, static or gpudiag: all meet in gpudiag's own store; static needs "
                  "--node-rank");
  sub->add_option("--rdzv-id,--rdzv_id", options->rdzv_id,
                  "The job's id, the same on every node: tells two jobs on one endpoint apart");
  sub->add_option("--rdzv-conf,--rdzv_conf", text->rdzv_conf,
                  "join_timeout=S (wait for MIN nodes, default 600), last_call_timeout=S (then "
                  "for more, default 3)");
  sub->add_option("--max-restarts,--max_restarts", options->max_restarts,
                  "Restart the whole local group up to N times after a rank fails")
      ->capture_default_str();
  sub->add_option("--restart-policy", text->restart_policy,
                  "on-new-error: stop restarting when a rank raised the same exception at the "
                  "same line of its code as in the attempt before (a workload error); always: "
                  "restart every failure, as torchrun")
      ->check(CLI::IsMember({"on-new-error", "always"}))
      ->capture_default_str();
  sub->add_flag("--preflight", options->preflight,
                "Before each round of a rendezvous, check this node with gpudiag check (seconds, "
                "bounded by --preflight-timeout); a node it finds broken or slow is left out of "
                "the round while --nnodes MIN remain (docs/launch.md, \"Preflight\")");
  sub->add_option("--preflight-timeout", options->preflight_timeout_s,
                  "Seconds --preflight's check may take on a node; one that takes longer is "
                  "stopped and counts as slow")
      ->check(Seconds(1, 3600))
      ->capture_default_str();
  sub->add_option("--preflight-slow", text->preflight_slow,
                  "exclude: a node --preflight's check judged slow (a rank's compute SLOW, the "
                  "bus bandwidth WARN) is left out as a broken one; warn: it is said and admitted")
      ->check(CLI::IsMember({"exclude", "warn"}))
      ->capture_default_str();
  sub->add_option("-t,--tee", text->tee,
                  "Also write rank output to --log-dir: 1 stdout, 2 stderr, 3 both, or "
                  "LOCAL_RANK:V,...");
  sub->add_option("-r,--redirects", text->redirects,
                  "Write rank output only to --log-dir: 1 stdout, 2 stderr, 3 both, or "
                  "LOCAL_RANK:V,...");
  sub->add_option("--log-dir,--log_dir", options->log_dir,
                  "Folder for DIR/<rdzv id>_<launch id>/attempt_K/<local rank>/{stdout,stderr}.log "
                  "(alone: both streams, still also on the console)");
  sub->add_flag("--no-python,--no_python", options->no_python,
                "As torchrun: the command is a program (searched in PATH), run without python");
  sub->add_flag("-m,--module", options->module,
                "As torchrun: the command is a Python module, run as `python -u -m MODULE args` "
                "(python: PYTHON_EXEC, else the python3 in PATH)");
  // torchrun's options that change nothing here, accepted so its command
  // lines run unchanged: each rank is a process of its own (any start
  // method), a script runs as `python -u SCRIPT` (--run-path), and the
  // address other nodes reach is the store's own (--local-addr).
  auto start_method = std::make_shared<std::string>("spawn");
  sub->add_option("--start-method,--start_method", *start_method,
                  "Accepted for torchrun's command lines: every rank is a process of its own")
      ->check(CLI::IsMember({"spawn", "fork", "forkserver"}));
  auto run_path = std::make_shared<bool>(false);
  sub->add_flag("--run-path,--run_path", *run_path,
                "Accepted for torchrun's command lines: a script runs as python -u SCRIPT");
  auto local_addr = std::make_shared<std::string>();
  sub->add_option("--local-addr,--local_addr", *local_addr,
                  "Accepted for torchrun's command lines: other nodes reach this one through the "
                  "store's address");
  sub->add_option("--role", options->role, "As torchrun: ROLE_NAME of the ranks")
      ->capture_default_str();
  sub->add_option("--report-node", options->report_node,
                  "gpudiag: at a rendezvous (no --node-rank), the host that takes node 0, so rank "
                  "0's report and files land there (default: the rendezvous endpoint's host)");
  sub->add_option("--local-ranks-filter,--local_ranks_filter", text->local_ranks_filter,
                  "As torchrun: only these local ranks' output on the console, e.g. 0,1 (their "
                  "--log-dir files keep everything)");
  sub->add_option("--exit-code", text->exit_code,
                  "gpudiag: the first failing rank's status (128+signal when killed); torchrun: "
                  "1 for any failure, as torchrun exits")
      ->check(CLI::IsMember({"gpudiag", "torchrun"}))
      ->capture_default_str();
  auto monitor_interval = std::make_shared<double>(0.0);
  sub->add_option("--monitor-interval,--monitor_interval", *monitor_interval,
                  "Accepted for torchrun's command lines: gpudiag watches its ranks continuously")
      ->check(Seconds(0, 86400));
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
  sub->add_option("--hang-timeout", options->hang_timeout_s,
                  "When no rank made progress for this many seconds (no output, no collective "
                  "completed, no change of where its code is; CPU time alone is not progress): "
                  "print where every rank is (by its stack), then stop the job (0: never). "
                  "kill -USR1 <launcher> prints the same at any time and the job goes on")
      ->check(Seconds(0, 30 * 86400))
      ->capture_default_str();
  sub->add_option("--nccl-ras-timeout", options->nccl_ras_timeout_s,
                  "With every report of where the ranks are, and after the first failure, ask "
                  "this node's NCCL RAS (NCCL 2.24+, at the ranks' NCCL_RAS_ADDR) which "
                  "processes are dead or silent and whose collective counts differ, for at most "
                  "this many seconds (0: never ask; docs/ras.md)")
      ->check(Seconds(0, 600))
      ->capture_default_str();
  sub->add_flag("--no-stack-hook", [options](std::int64_t) { options->stack_hook = false; },
                "Do not give Python ranks the faulthandler startup file that lets the launcher "
                "read their Python stacks (they are then read natively, with eu-stack or gdb)");
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
  sub->add_flag("--stragglers", options->stragglers,
                "Measure when each Python rank arrives at each collective of each process group "
                "and name, while the job runs, the rank the others wait for (docs/launch.md, "
                "\"Stragglers\")");
  sub->add_option("--prometheus", options->prometheus,
                  "With --stragglers: keep this Prometheus textfile current with the ranks named "
                  "(node_exporter's textfile collector)");
  auto json_path = std::make_shared<std::string>();
  add_json_option(sub, *json_path, "the launcher writes the job's summary (ranks, exits, times)");
  auto history_dir = std::make_shared<std::string>();
  add_history_option(sub, *history_dir);
  sub->positionals_at_end();
  sub->add_option("command", options->command,
                  "What each rank runs, as torchrun: SCRIPT.py [args] (run by PYTHON_EXEC, else "
                  "the python3 in PATH), -m MODULE [args], --no-python PROGRAM [args]; or a "
                  "gpudiag subcommand and its options (-- check ...)");

  return [&app, options, no_prefix, secret_file, text, monitor_interval, json_path, start_method,
          run_path, local_addr, history_dir]() -> int {
    (void)monitor_interval, (void)start_method, (void)run_path;  // accepted and checked, not needed
    if (local_addr->size() > 255) throw UsageError("launch: --local-addr is not a host name");
    options->prefix = !*no_prefix;
    read_torchrun_text(*text, *options);
    std::vector<std::string> subcommands;
    for (const auto* s : app.get_subcommands([](CLI::App*) { return true; }))
      subcommands.push_back(s->get_name());
    launch::resolve_entry(*options, subcommands, Env::from_process());
    launch::validate(*options, subcommands);
    if (!options->prometheus.empty())
      check_file_target("--prometheus", options->prometheus, WriteMode::replace);
    // gpudiag ranks meet in a store the launcher serves; a foreign program
    // (--no-gpudiag) may want MASTER_PORT for its own, so it gets none.
    auto env = Env::from_process();
    // The ranks' logs then carry the relay's prefix alone (util/log.h).
    env.set("GPUDIAG_LAUNCH_PREFIX", options->prefix ? "1" : "0");
    // --history reaches the ranks too: a gpudiag subcommand records its own verdict there.
    const std::string history = read_history_dir(env, *history_dir);
    if (!history.empty()) env.set("GPUDIAG_HISTORY", history);
    auto secret = secret_file->empty()
                      ? read_job_secret(env)
                      : std::optional(read_secret_file(*secret_file, "--secret-file"));
    const bool meets = launch::meeting(*options) == launch::Meeting::rendezvous;
    JobRecorder recorder(nullptr);  // --json: the summary across attempts
    std::unique_ptr<launch::Rounds> rounds;
    int status;
    // A torch program under the static rendezvous gets the launcher's store as
    // its agent store, as under torchrun: the launcher serves one then.
    if (options->no_gpudiag && !meets && !launch::uses_agent_store(*options)) {
      status = launch::run_launch(*options, env, &recorder);
    } else {
      launch::RendezvousTimes times{options->join_timeout_s, options->last_call_s};
      // At a rendezvous the rounds (and the store serving them) span the attempts.
      if (meets) rounds = std::make_unique<launch::Rounds>(short_hostname(), times);
      if (rounds && options->preflight)
        rounds->set_preflight(launch::preflight_for_rounds(
            options->nproc_per_node, options->preflight_timeout_s, env, options->preflight_slow));
      status = launch::run_launch(*options, env, [&]() -> std::unique_ptr<launch::LaunchObserver> {
        return std::make_unique<RecordingObserver>(
            std::make_unique<launch::StoreHost>(short_hostname(), secret, !options->no_gpudiag,
                                                times, rounds.get()),
            recorder);
      });
    }
    if (!history.empty()) record_history(history, env, recorder, status);
    // torchrun's launcher ends in ChildFailedError: exit 1, whatever the rank's status.
    if (options->torchrun_exit_code && status != 0) status = 1;
    if (json_path->empty()) return status;
    auto doc = recorder.document(options->command, status);
    // Always there (a consumer reads one shape): empty without a rendezvous.
    doc["rounds"] = rounds ? rounds_json(rounds->history()) : nlohmann::json::array();
    const int json_status = emit_json(*json_path, kLaunchSchema, doc);
    return status != 0 ? status : json_status;
  };
}

}  // namespace gpudiag::cli
