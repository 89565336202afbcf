// gpudiag launch, as a library call: start N ranks on this node, each with
// the torchrun-style environment, relay their output, and stop the job as a
// whole. The pieces: options.h (what was asked), job.h (defaults and each
// rank's environment), child.h (one process), output.h (line relay),
// signal_pipe.h (signals into the loop), supervisor.h (the loop),
// observer.h (the seam for a hosted store).
#pragma once

#include "launch/observer.h"
#include "launch/options.h"
#include "util/env.h"

namespace gpudiag::launch {

/// Runs the job `options` describes (already validate()d) on this node.
/// `env` is the launcher's environment: the children inherit it (see
/// rank_environment()) and PATH finds a --no-gpudiag program. `observer`,
/// if given, hears the job start and each child end.
///
/// Returns the launcher's exit status: 0 when every child exited 0; else the
/// first failing child's (its exit code, or 128 + its signal); else, when the
/// launcher was interrupted, 128 + that signal; else 3 when --timeout ended
/// the job. Throws gpudiag::Error when the job cannot start (the program is
/// missing, no free port, fork fails); children already started are killed.
int run_launch(const LaunchOptions& options, const Env& env, LaunchObserver* observer = nullptr);

}  // namespace gpudiag::launch
