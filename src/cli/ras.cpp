// gpudiag ras: ask NCCL's RAS (2.24 and later) about the job it runs in, and say what is
// wrong: dead or unresponsive processes, communicators whose ranks' operation counts or
// states differ, ranks that reported NCCL errors.
//
//   gpudiag ras [HOST[:PORT]]... [--timeout SECONDS] [--format auto|json|text]
//               [--sample-gap SECONDS] [--max-reply SIZE] [--json FILE|-]
//
// With no endpoint it asks NCCL_RAS_ADDR, else localhost:28028, as NCCL listens
// (nccl_ras/endpoint.h). Each endpoint is asked on its own thread (nccl_ras/survey.h) and
// the answers are merged; counts that differ are sampled again --sample-gap seconds later,
// and only counts that did not move are a fault (nccl_ras/motion.h). Exit status: 0 every endpoint
// answered and RAS saw nothing wrong, 1 RAS saw something wrong, 2 bad usage, 3 no finding and an
// endpoint did not answer (refused, silent, not RAS, or cut short).
#include <memory>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "nccl_ras/survey.h"
#include "report/status_line.h"
#include "util/env.h"
#include "util/error.h"

namespace gpudiag::cli {

namespace {

struct RasOptions {
  std::vector<std::string> endpoints;
  std::string json;
  std::string format = "auto";
  int timeout_s = 5;
  double sample_gap_s = 2;
  std::uint64_t max_reply = std::uint64_t{64} << 20;
};

int run_ras(const RasOptions& opt) {
  check_json_target(opt.json);
  std::vector<ras::Endpoint> endpoints;
  for (const auto& text : opt.endpoints) {
    std::string why;
    auto e = ras::parse_endpoint(text, &why);
    if (!e) throw UsageError("ras: " + why, "give HOST, HOST:PORT or [IPV6]:PORT");
    endpoints.push_back(*e);
  }
  if (endpoints.empty()) {
    auto settings = ras::ras_settings(Env::from_process());
    if (!settings.problem.empty())
      throw UsageError("ras: " + settings.problem, "give the endpoint as an argument");
    endpoints.push_back(settings.endpoint);
  }
  ras::QueryOptions q;
  q.collect_timeout_s = opt.timeout_s;
  // The waits are ncclras's (client.h); silent connections are retried as long as a report
  // may take.
  q.retry_s = q.reply_s();
  q.format = opt.format == "json"   ? ras::Format::json
             : opt.format == "text" ? ras::Format::text
                                    : ras::Format::automatic;
  q.max_reply = static_cast<std::size_t>(opt.max_reply);
  const auto s = ras::survey(endpoints, q, opt.sample_gap_s);
  write_all(human_fd(opt.json), ras::survey_text(s));
  if (!opt.json.empty()) {
    if (int status = emit_json(opt.json, "gpudiag-ras/1", ras::survey_json(s)); status != 0)
      return status;
  }
  return s.exit_status();
}

}  // namespace

Runner setup_ras(CLI::App& app) {
  auto opt = std::make_shared<RasOptions>();
  auto* sub = app.add_subcommand(
      "ras",
      "Ask NCCL's RAS (NCCL 2.24+) which processes of a running job are dead or silent, and "
      "which communicators' ranks disagree");
  sub->add_option("endpoints", opt->endpoints,
                  "RAS sockets to ask, one per node (default: NCCL_RAS_ADDR, else localhost:28028)")
      ->type_name("HOST[:PORT]");
  sub->add_option("--timeout", opt->timeout_s,
                  "how long RAS waits for the job's other processes (sent as its TIMEOUT); "
                  "gpudiag waits for the report 6 s more, as ncclras does")
      ->check(CLI::Range(1, 3600))
      ->default_str("5");
  sub->add_option("--sample-gap", opt->sample_gap_s,
                  "when counts differ, ask again this many seconds later: counts that moved "
                  "are collectives in flight, not a fault (0: at once)")
      ->check(CLI::Range(0.0, 60.0))
      ->default_str("2");
  sub->add_option("--format", opt->format,
                  "the report to ask for: json where the NCCL has it (2.28.7+), else text")
      ->check(CLI::IsMember({"auto", "json", "text"}))
      ->default_str("auto");
  sub->add_option("--max-reply", opt->max_reply, "refuse a reply larger than this")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{1} << 34))
      ->default_str("64MiB");
  add_json_option(sub, opt->json, "write the findings (schema gpudiag-ras/1)");
  return [opt]() -> int { return run_ras(*opt); };
}

}  // namespace gpudiag::cli
