// The startup file gpudiag launch puts first on a Python rank's path
// (sitecustomize.py; docs/launch.md, --no-stack-hook turns it off): on
// SIGUSR2 the rank writes every thread's Python stack to GPUDIAG_STACK_FILE,
// and it keeps the rank's progress for --hang-timeout; the user's own
// sitecustomize (the next one on sys.path) still runs; an uncaught exception
// of the rank (sys.excepthook, threading.excepthook, chained to the hooks
// installed before) is written to TORCHELASTIC_ERROR_FILE in torch's @record
// format, unless @record wrote one first.
#pragma once

#include <string>

namespace gpudiag::launch {

/// Writes DIR/sitecustomize.py. Throws UsageError when it cannot.
void write_python_hook(const std::string& dir);

}  // namespace gpudiag::launch
