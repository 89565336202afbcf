// The one way gpudiag writes a file it was asked to write (docs/formats.md,
// "Files gpudiag writes"), so a local user who can write the folder cannot
// turn the write against another file:
//
//   through  (--json, --exclude-file, --good-hostfile, -J, scan --json, ...):
//            written in place. A regular file (created if absent), a character
//            device (/dev/null), a FIFO (opened without blocking: no reader is
//            an error, not a hang), and /dev/stdout, /dev/stderr, /dev/fd/N.
//            Any other symbolic link is refused (opened with O_NOFOLLOW), as
//            are folders, block devices and sockets; what was opened is
//            checked again with fstat.
//   replace  (--prometheus): a fresh temporary file beside the target,
//            created with O_EXCL under a random name (never a predictable one
//            an attacker could plant a link at), written, fsync'd, mode 0644,
//            then renamed over the target. The target must be absent or a
//            regular file: a link, device or FIFO there is refused (rename
//            would replace it).
//
// A refusal or failure is one line, "gpudiag: OPTION PATH: ...; try: ...",
// and the usage exit status (2).
#pragma once

#include <string>

namespace gpudiag {

enum class WriteMode { through, replace };

/// Refuses, before any work, a target write_file() would refuse: throws
/// UsageError naming `option`. Absent paths in existing writable folders pass.
void check_file_target(const std::string& option, const std::string& path, WriteMode mode);

/// Writes `text` to `path`; 0, or the usage exit status after printing one
/// line on stderr.
int write_file(const std::string& option, const std::string& path, const std::string& text,
               WriteMode mode);

}  // namespace gpudiag
