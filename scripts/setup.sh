#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and run
# `gpudiag check` on 2 local ranks (NCCL on GPUs, the host backend without).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The main job needs gpudiag and the scanner library the NaN quick start loads
# (build/libgpudiag_scan.so); the test suite is built by the test command, into
# the same build/ with the same (release) type, reusing these objects.
GPUDIAG_BUILD_TARGETS="gpudiag gpudiag_scan" scripts/build.sh
echo "setup: running gpudiag check on 2 local ranks"
exec build/gpudiag launch --nproc-per-node 2 -- check "$@"
