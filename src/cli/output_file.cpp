// write_output_file() (commands.h): the --json, --exclude-file and host files,
// written in place by the one writer (util/file_out.h, WriteMode::through).
#include "cli/commands.h"
#include "util/file_out.h"

namespace gpudiag::cli {

int write_output_file(const std::string& option, const std::string& path, const std::string& text) {
  return write_file(option, path, text, WriteMode::through);
}

}  // namespace gpudiag::cli
