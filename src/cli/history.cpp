// gpudiag history DIR: what the records of --history DIR say (history/): the
// hosts and GPUs by how often a verdict blamed them, and the GPUs that came
// back under another host name. Exit status: 0 read (whatever it says), 2 the
// folder cannot be read or a bad option.
#include <unistd.h>

#include <ctime>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "history/folder.h"
#include "history/tally.h"
#include "util/fd_write.h"

namespace gpudiag::cli {

namespace {

struct HistoryCli {
  std::string dir;
  double days = 0;  ///< 0: every record
  std::string json_path;
};

int run(const HistoryCli& o) {
  const auto folder = history::read_folder(o.dir);
  const std::string since =
      o.days > 0 ? history::utc_time(std::time(nullptr) - static_cast<std::time_t>(o.days * 86400))
                 : "";
  const auto t = history::tally(folder.records, since);
  write_all(human_fd(o.json_path), history::tally_text(t, folder, since));
  if (o.json_path.empty()) return 0;
  return emit_json(o.json_path, "gpudiag-history-report/1", history::tally_json(t, folder, since));
}

}  // namespace

Runner setup_history(CLI::App& app) {
  auto o = std::make_shared<HistoryCli>();
  auto* sub =
      app.add_subcommand("history",
                         "Read the records of --history DIR: hosts and GPUs by how often a verdict "
                         "blamed them, and GPUs seen under another host name");
  sub->add_option("dir", o->dir, "the folder given to --history (GPUDIAG_HISTORY)")->required();
  sub->add_option("--days", o->days, "count only the records of the last DAYS days (0: all)")
      ->type_name("DAYS")
      ->check(FiniteIn(0, 36500, "days"))
      ->capture_default_str();
  add_json_option(sub, o->json_path, "the report");
  return [o] { return run(*o); };
}

}  // namespace gpudiag::cli
