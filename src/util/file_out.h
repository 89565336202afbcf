// The one way gpudiag writes a file it was asked to write (docs/formats.md,
// "Files gpudiag writes"), so a local user who can write the folder cannot
// turn the write against another file:
//
//   through  (--json, --exclude-file, --good-hostfile, -J, scan --json, ...):
//            written in place. A regular file (created if absent), a character
//            device (/dev/null), a FIFO (opened and written without blocking:
//            no reader, or one that takes nothing for 10 s, is an error, not
//            a hang), and /dev/stdout, /dev/stderr, /dev/fd/N. Any other
//            symbolic link is refused (opened with O_NOFOLLOW), as are
//            folders, block devices, sockets, and a regular file of another
//            user with more than one name (a planted hard link); what was
//            opened is checked again with fstat.
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

/// Opens `path` for writing as a fresh or emptied regular file of gpudiag's
/// own (a log, a stack file): never through a link, never blocking on a FIFO,
/// never another user's file with a second name. The descriptor (blocking,
/// close-on-exec), or -1 with errno set (ELOOP a link, EINVAL not a regular
/// file, EPERM another user's hard link).
int open_own_file(const std::string& path, int mode = 0644);

/// Writes `text` to `path`; 0, or the usage exit status after printing one
/// line on stderr.
int write_file(const std::string& option, const std::string& path, const std::string& text,
               WriteMode mode);

}  // namespace gpudiag
