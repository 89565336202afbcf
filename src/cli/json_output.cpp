// emit_json() and friends (json_output.h). The compact form puts "schema"
// first so that a relay can tell gpudiag's documents from other lines by
// their first bytes ({"schema":"gpudiag-); nlohmann::json sorts keys, so the
// document is re-keyed into an ordered_json before it is written.
#include "cli/json_output.h"


#include <unistd.h>

#include <filesystem>

#include "cli/commands.h"
#include "report/status_line.h"
#include "util/error.h"
#include "util/file_out.h"
#include "util/text.h"

namespace gpudiag::cli {

void check_json_target(const std::string& path) {
  check_file_target("--json", path, WriteMode::through);
}

CLI::Option* add_json_option(CLI::App* sub, std::string& path, const std::string& what,
                             bool text_moves) {
  return sub->add_option("--json", path,
                         what + " as JSON to FILE, or to stdout with -" +
                             (text_moves ? " (then the text goes to stderr)" : "") +
                             "; docs/json.md")
      ->type_name("FILE|-")
      ->expected(0, 1)
      ->default_str(kJsonStdout);
}

int human_fd(const std::string& json_path) {
  return json_to_stdout(json_path) ? STDERR_FILENO : STDOUT_FILENO;
}

std::string json_text(const nlohmann::ordered_json& doc, bool pretty) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (doc.is_object() && doc.contains("schema")) out["schema"] = doc["schema"];
  for (const auto& [key, value] : doc.items())
    if (key != "schema") out[key] = value;
  return out.dump(pretty ? 2 : -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
         "\n";
}

int emit_json(const std::string& path, nlohmann::ordered_json doc) {
  if (json_to_stdout(path)) {
    write_all(STDOUT_FILENO, json_text(doc, ::isatty(STDOUT_FILENO) == 1));
    return 0;
  }
  return write_output_file("--json", path, json_text(doc, true));
}

int emit_json(const std::string& path, const std::string& schema, const nlohmann::json& doc) {
  // Through text: nlohmann::json and ordered_json are different types.
  auto ordered = nlohmann::ordered_json::parse(
      doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  ordered["schema"] = schema;
  return emit_json(path, std::move(ordered));
}

}  // namespace gpudiag::cli
