// ExistingPathExplained() and the stored command line (commands.h). A path
// argument that must exist gets the reason in words when it does not: stat()
// follows links, lstat() tells a link from nothing, and errno tells a loop
// from a missing target.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "cli/commands.h"
#include "util/text.h"

namespace gpudiag::cli {

namespace {
std::vector<std::string>& stored_command_line() {
  static std::vector<std::string> line;
  return line;
}
}  // namespace

void set_command_line(int argc, char** argv) {
  stored_command_line().assign(argv, argv + argc);
}

const std::vector<std::string>& command_line() { return stored_command_line(); }

CLI::Validator ExistingPathExplained() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0) return {};
        const int err = errno;
        const std::string shown = clean_text(path);
        struct stat link {};
        const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
        if (err == ELOOP) return shown + " is a loop of symbolic links (each points on to another)";
        if (is_link && err == ENOENT) return shown + " is a symbolic link to a path that does not exist";
        if (err == ENOENT) return shown + " does not exist";
        if (err == EACCES) return shown + " cannot be reached: a folder on the way may not be searched";
        return shown + ": " + std::strerror(err);
      },
      "PATH");
}

}  // namespace gpudiag::cli
