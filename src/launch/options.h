// What `gpudiag launch` was asked to do, and the checks that run before any
// process starts.
//
// LaunchOptions is filled by the command line (src/cli/launch.cpp) or by a
// test; validate() rejects a bad combination with a one-line UsageError that
// names the option and what to do, so a job never starts half-configured.
// The parse_* functions turn torchrun's value syntaxes into plain fields, each
// with its own one-line error: `--nproc-per-node N|gpu|cpu|auto`, `--nnodes N`
// or `MIN:MAX`, `--rdzv-endpoint HOST[:PORT]`, `--tee`/`--redirects` (one
// value 0-3 or a per-local-rank map `0:1,1:3`) and `--rdzv-conf k=v,...`.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/preflight.h"
#include "launch/restart_policy.h"

namespace gpudiag::launch {

/// Upper bound for --nproc-per-node: each child costs the launcher two pipes
/// and a store connection, and a common hard open-file limit (4096) must hold
/// them all (the launcher raises its soft limit to the hard one).
inline constexpr int kMaxProcPerNode = 1024;
/// torchrun's --local-ranks-filter "0,2": the local ranks, each below `nproc`.
std::vector<int> parse_local_ranks(const std::string& text, int nproc);

/// Upper bound for --nnodes, so the world size fits an int with room to spare.
inline constexpr int kMaxNodes = 65536;

/// Which of a rank's streams go somewhere (torchrun's Std): 1 stdout, 2 stderr, 3 both.
inline constexpr int kStdOut = 1, kStdErr = 2;

struct LaunchOptions {
  int nproc_per_node = 1;
  /// Nodes in the job; with an elastic range (`--nnodes MIN:MAX`), MAX.
  int nnodes = 1;
  /// The elastic range's MIN; 0: a fixed count (MIN = nnodes).
  int min_nodes = 0;
  /// Not given: 0 without a rendezvous endpoint, else assigned at the rendezvous.
  std::optional<int> node_rank;
  /// Empty: 127.0.0.1 on one node; required when nnodes > 1.
  std::string master_addr;
  /// Not given: a free port on one node, 29500 on several (like torchrun).
  std::optional<int> master_port;
  /// Seconds the other ranks get, after the first failure, before SIGTERM.
  double grace_s = 5.0;
  /// Seconds between SIGTERM (or a forwarded signal) and SIGKILL.
  double kill_after_s = 3.0;
  /// Wall-clock limit for the whole job in seconds; 0: none.
  double timeout_s = 0.0;
  /// Seconds a rank may take to exit after printing its status line before it
  /// is reported and killed (a teardown hang); < 0: auto, the check's own
  /// --timeout (or 60) plus 60, so a rank waiting for slower peers is spared.
  double exit_timeout_s = -1.0;
  /// Prefix each output line with "[rankN]: ".
  bool prefix = true;
  /// Run `command` as a program (searched in PATH) instead of a gpudiag subcommand.
  bool no_gpudiag = false;
  /// torchrun's -m (the command's first word is a Python module) and
  /// --no-python (a program); resolve_entry (entry.h) turns them into command.
  bool module = false;
  bool no_python = false;
  /// Set by resolve_entry: the children are a torch program's, and get
  /// torchrun's environment and error files.
  bool torch_children = false;
  /// Set by resolve_entry: the command is python (SCRIPT or -m).
  bool python_entry = false;
  /// --hang-timeout: report every rank's stack and stop when no output and no
  /// CPU time moved this long (0: never). --no-stack-hook: no faulthandler
  /// startup file for Python ranks (their stacks are then native).
  double hang_timeout_s = 0.0;
  bool stack_hook = true;
  /// --nccl-ras-timeout: with every stack report, and after the first failure, ask the
  /// ranks' NCCL RAS (launch/ras_note.h) for at most this long (0: never ask).
  double nccl_ras_timeout_s = 5.0;
  /// torchrun's rendezvous: --standalone (one node, a free local port),
  /// --rdzv-endpoint HOST[:PORT] (empty: none; the port defaults to 29400),
  /// --rdzv-backend c10d|static|gpudiag (empty: not given), --rdzv-id.
  bool standalone = false;
  /// torchrun's --role (ROLE_NAME of the children).
  std::string role = "default";
  /// The host that takes node 0 when node ranks are assigned (rendezvous).
  std::string report_node;
  /// torchrun's --local-ranks-filter: only these local ranks' output goes to
  /// the console (their log files, with --log-dir, keep everything); empty: all.
  std::vector<int> console_ranks;
  /// --exit-code torchrun: a failed job exits 1 as torchrun does (its retry
  /// scripts test for it), not the failing rank's status.
  bool torchrun_exit_code = false;
  std::string rdzv_endpoint;
  std::string rdzv_backend;
  std::string rdzv_id;
  /// Seconds to wait for MIN nodes (torchrun's join_timeout, 600).
  double join_timeout_s = 600.0;
  /// Seconds to wait for more nodes, up to MAX, once MIN have joined
  /// (torchrun's last_call_timeout; shorter here: 3).
  double last_call_s = 3.0;
  /// Restarts of the whole local group after a rank fails.
  int max_restarts = 0;
  /// --restart-policy: on-new-error stops restarting when an attempt's cause
  /// raised as the attempt before's did (restart_policy.h); always restarts.
  RestartPolicy restart_policy = RestartPolicy::on_new_error;
  /// --preflight: before each round of a rendezvous, check this node with
  /// gpudiag check for at most --preflight-timeout seconds (preflight.h).
  bool preflight = false;
  double preflight_timeout_s = 60.0;
  /// --preflight-slow: a node the check judged slow is left out (exclude) or
  /// said and admitted (warn).
  PreflightSlow preflight_slow = PreflightSlow::exclude;
  /// Per local rank (index), the streams copied to --log-dir files (tee) and
  /// the streams sent only there (redirects); empty: none.
  std::vector<int> tee;
  std::vector<int> redirects;
  /// Where per-rank stdout.log/stderr.log go; empty: a fresh /tmp folder when
  /// tee or redirects ask for files, else no files.
  std::string log_dir;
  /// --stragglers: Python ranks report their arrivals at collectives, and the
  /// rank the others wait for is named as the job runs (src/stragglers/).
  bool stragglers = false;
  /// --prometheus FILE: the stragglers' textfile, kept current ("" none).
  std::string prometheus;
  /// Everything after `--`: a gpudiag subcommand and its options, or a program and its arguments.
  std::vector<std::string> command;
};

/// Throws gpudiag::UsageError for the first problem found: counts out of
/// range, a node rank outside [0, nnodes), a bad port, a missing master
/// address on several nodes, negative timeouts, an empty command, or (unless
/// no_gpudiag) a first word that is not one of `subcommands` or is `launch`.
void validate(const LaunchOptions& options, const std::vector<std::string>& subcommands);

/// The rendezvous endpoint's default port, as torchrun's.
inline constexpr int kDefaultRdzvPort = 29400;

/// `--nproc-per-node` text: a count, `gpu` (the visible GPUs; an error when
/// there are none), `cpu` (`cpus`) or `auto` (GPUs if any, else CPUs), as torchrun.
int parse_nproc(const std::string& text, int gpus, int cpus);
/// `--nnodes` text, `N` or `MIN:MAX`, into o.nnodes and o.min_nodes.
void parse_nnodes(const std::string& text, LaunchOptions& o);
/// `--tee`/`--redirects` text (`3` or `0:1,1:2`) into one value per local rank.
std::vector<int> parse_std_spec(const std::string& flag, const std::string& text, int nproc);
/// HOST[:PORT] (IPv6 in brackets) into host and port (kDefaultRdzvPort when left out).
std::pair<std::string, int> parse_endpoint(const std::string& text);
/// `--rdzv-conf join_timeout=S,last_call_timeout=S` into o; other keys are refused.
void parse_rdzv_conf(const std::string& text, LaunchOptions& o);

/// How the nodes of this job meet.
enum class Meeting {
  alone,    ///< one node, nobody to meet (also --standalone)
  by_hand,  ///< --node-rank on every node, node 0 serves the store at --master-addr:--master-port
  rendezvous,  ///< launchers meet at the endpoint, node ranks and the node count settled there
};
Meeting meeting(const LaunchOptions& o);
/// The minimum node count (min_nodes, or nnodes when fixed).
inline int min_nodes(const LaunchOptions& o) { return o.min_nodes > 0 ? o.min_nodes : o.nnodes; }

/// --exit-timeout as given, or its automatic value (see exit_timeout_s).
double effective_exit_timeout(const LaunchOptions& options);

}  // namespace gpudiag::launch
