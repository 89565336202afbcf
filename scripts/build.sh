#!/usr/bin/env bash
# Configures and builds gpudiag into build/ (or $GPUDIAG_BUILD_DIR).
# Extra arguments go to cmake's configure step, e.g. -DGPUDIAG_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GPUDIAG_BUILD_DIR:-build}
jobs=${GPUDIAG_JOBS:-$(nproc)}
# Ninja when it is there (a changed CMakeLists.txt then rebuilds only what it
# changed); a directory configured before keeps its generator.
gen=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
cmake -S . -B "$build" "${gen[@]}" "$@"
# GPUDIAG_BUILD_TARGETS (e.g. "gpudiag") builds those targets only.
targets=()
for t in ${GPUDIAG_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
