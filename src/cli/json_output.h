// The one JSON convention of every subcommand that reports (docs/json.md):
// `--json FILE` writes the document to FILE, `--json -` (or a bare `--json`)
// to stdout, and then the human text that would have gone to stdout goes to
// stderr, so stdout stays parseable. Every document starts with its
// "schema" ("gpudiag-check/1", ...). On stdout a document is indented on a
// terminal and otherwise one compact line, schema first: several ranks'
// documents then form JSON Lines, and `gpudiag launch` relays such a line
// without its "[rankN]: " prefix (launch/line_splitter.cpp), so
// `launch -- info --json -` prints one JSON Lines stream.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace gpudiag::cli {

/// Each document's "schema" (docs/json.md); scan's is gpudiag-scan/1.
inline constexpr const char* kCheckSchema = "gpudiag-check/1";
inline constexpr const char* kBenchSchema = "gpudiag-bench/2";
inline constexpr const char* kLinksSchema = "gpudiag-links/1";
inline constexpr const char* kInfoSchema = "gpudiag-info/1";
inline constexpr const char* kNcclLogSchema = "gpudiag-nccl-log/1";
inline constexpr const char* kLaunchSchema = "gpudiag-launch/1";

/// The value of `--json` that means stdout.
inline constexpr const char* kJsonStdout = "-";

/// Adds `--json [FILE|-]` to `sub`; `what` says what is written. A bare
/// `--json` means stdout (as info and nccl-log's flag always did).
/// `text_moves`: with `-`, this subcommand's text goes to stderr (so says the help).
CLI::Option* add_json_option(CLI::App* sub, std::string& path, const std::string& what,
                             bool text_moves = true);

/// True when `path` (the --json value) is stdout.
inline bool json_to_stdout(const std::string& path) { return path == kJsonStdout; }

/// The descriptor for the human text: stderr when the JSON takes stdout.
int human_fd(const std::string& json_path);

/// `doc` as text: indented (`pretty`) or one line; "schema" first either way.
/// Invalid UTF-8 (names read from files) is replaced, never an exception.
std::string json_text(const nlohmann::ordered_json& doc, bool pretty);

/// Before a job starts: a --json FILE that could not be written at its end
/// (its folder missing or not writable, or the path a folder) is a UsageError
/// now, rather than after the whole job ran. "" and "-" pass.
void check_json_target(const std::string& path);

/// Writes `doc` (which must carry `schema`) where `path` says: stdout, or the
/// file (indented). Returns 0, or 2 with one line on stderr when the file
/// cannot be written (write_output_file()).
int emit_json(const std::string& path, nlohmann::ordered_json doc);
/// The same for a document built as nlohmann::json; `schema` is added first.
int emit_json(const std::string& path, const std::string& schema, const nlohmann::json& doc);

}  // namespace gpudiag::cli
