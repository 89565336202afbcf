// gpudiag info: what this rank would use and why; no MPI or NCCL initialised.
// The text and the JSON (schema gpudiag-info/1) say the same, so with
// `--json -` only the JSON is printed; with `--json FILE` the text still goes
// to stdout. `--prometheus PATH` writes the node's hardware findings by class
// as metrics (report/prom_reports.h), for node_exporter's textfile collector.
#include <unistd.h>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "report/prom_reports.h"
#include "report/status_line.h"
#include "util/error.h"
#include "util/file_out.h"
#include "world/info.h"

namespace gpudiag::cli {

Runner setup_info(CLI::App& app) {
  struct Options {
    std::string json;
    int device = -1;
    std::string nccl_lib;
    std::string prometheus;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "info", "Show the launcher, rank, GPU, CUDA/NCCL/MPI versions and relevant environment");
  add_json_option(sub, o->json, "write what this rank would use (- prints only the JSON)", false);
  sub->add_option("--device", o->device, "CUDA device ordinal (default: local rank)")
      ->check(DeviceOrdinal());
  add_nccl_lib_option(sub, o->nccl_lib);
  sub->add_option("--prometheus", o->prometheus,
                  "write this node's hardware findings by class as metrics in node_exporter's "
                  "textfile format (atomically)");
  return [o] {
    check_file_target("--prometheus", o->prometheus, WriteMode::replace);
    auto info = collect_info(Env::from_process(), o->device, o->nccl_lib);
    int status = static_cast<int>(info.contains("error") ? ExitCode::usage : ExitCode::ok);
    // One write per rank so blocks of ranks sharing a terminal stay whole.
    if (!json_to_stdout(o->json)) write_all(STDOUT_FILENO, render_info(info));
    if (int s = write_report_prometheus(o->prometheus, kInfoSchema, info, ""); s != 0 && status == 0)
      status = s;
    if (o->json.empty()) return status;
    const int json_status = emit_json(o->json, kInfoSchema, info);
    return status != 0 ? status : json_status;
  };
}

}  // namespace gpudiag::cli
