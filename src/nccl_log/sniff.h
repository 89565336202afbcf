// Which files of a run directory are NCCL logs, and which lines are gpudiag's own quotes.
//
// A run directory holds more than NCCL_DEBUG_FILE logs: the job's stdout, a `gpudiag
// nccl-log --json` or text report saved beside the logs, a checkpoint, notes. gpudiag's own
// reports quote NCCL lines as evidence, so reading one back would count every quoted line a
// second time, under a host the quote's prefix invents ("[default2]:node2"). So each file is
// judged before it is read, from its first block (64 KiB, read without blocking):
//
//   - gpudiag's own report: a JSON document ('{' first) whose head carries gpudiag's keys
//     ("schema": "gpudiag-...", "gpudiag": VERSION, or nccl-log's "nccl_lines"), or text
//     with nccl-log's header ("NCCL logs: N processes on M hosts; ...") in its first four
//     non-blank lines. Never read, whether found in a directory or named directly.
//   - binary data: a NUL byte in the first 4 KiB (as grep and git decide), and no NCCL line
//     in the block. Skipped inside a directory; read (as junk) when named directly.
//   - otherwise the file is read; one inside a directory that turns out to hold no NCCL line
//     at all is dropped afterwards (JobBuilder::add_source), its lines uncounted.
//
// Inside any file, a line that quotes evidence the way nccl-log's text report does
// ("  log:  FILE:LINE: TEXT", as `gpudiag check --nccl-debug` appends it to the job's
// output) is gpudiag's quote, not a log line: is_gpudiag_quote().
#pragma once

#include <string>
#include <string_view>

namespace gpudiag::nccl_log {

enum class FileVerdict { log, gpudiag_report, binary };

/// What `head` (the first bytes of a file) says the file is.
FileVerdict judge_head(std::string_view head);

/// Reads the first block of the regular file `path` and judges it; log when it cannot be
/// read here (open_log reports the error when the file is read).
FileVerdict judge_file(const std::string& path);

/// "a gpudiag report", "binary data", ... for the skipped-files notice.
const char* verdict_reason(FileVerdict v);

/// True for a line of nccl-log's text report that quotes a log line ("  log:  a.log:12: ...",
/// with any launcher prefix in front).
bool is_gpudiag_quote(std::string_view raw);

}  // namespace gpudiag::nccl_log
