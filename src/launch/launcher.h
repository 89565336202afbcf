// gpudiag launch, as a library call: start N ranks on this node, each with
// the torchrun-style environment, relay their output, and stop the job as a
// whole. The pieces: options.h (what was asked), job.h (defaults and each
// rank's environment), child.h (one process), output.h (line relay),
// signal_pipe.h (signals into the loop), supervisor.h (the loop),
// observer.h (the seam for a hosted store).
#pragma once

#include <functional>
#include <memory>

#include "launch/observer.h"
#include "launch/options.h"
#include "util/env.h"

namespace gpudiag::launch {

/// Runs the job `options` describes (already validate()d) on this node.
/// `env` is the launcher's environment: the children inherit it (see
/// rank_environment()) and PATH finds a --no-gpudiag program. `observer`,
/// if given, hears the job start and each child end.
///
/// Returns the launcher's exit status, decided from how every child ended and
/// never from which ended first (job_exit_status() in job_status.h): 128 +
/// the signal that interrupted the launcher; else 4, 2, a child's own death
/// by a signal (128 + it), 1, 3 (also when --timeout or --exit-timeout
/// stopped the job), any other code, in that order; 0 when every child
/// exited 0. Throws gpudiag::Error when the job cannot start (the program is
/// missing, no free port, fork fails); children already started are killed.
///
/// With --max-restarts N, a job that ended because a rank failed (not by a
/// signal to the launcher or a deadline) is started again as a whole, up to N
/// times, each attempt saying so; the status is the last attempt's. This
/// overload gives every attempt the same `observer`.
int run_launch(const LaunchOptions& options, const Env& env, LaunchObserver* observer = nullptr);

/// Makes a fresh observer per attempt (a hosted store must not outlive its
/// ranks: restarted ranks start over in a new store).
using ObserverFactory = std::function<std::unique_ptr<LaunchObserver>()>;
int run_launch(const LaunchOptions& options, const Env& env, const ObserverFactory& make_observer);

}  // namespace gpudiag::launch
