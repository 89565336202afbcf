#!/usr/bin/env bash
# Gathers what scripts/gpu-check.sh needs on a GPU machine that lacks the
# build's dependencies (GPUDIAG_PREBUILT=1): the binaries of a CUDA build
# (stripped), the shared libraries they need from this machine that a bare
# CUDA machine may not have (spdlog, fmt, libcrypto) in lib/, and, when
# NCCL_TESTS_BUILD names nccl-tests' build folder, its *_perf binaries in
# nccl-tests/ (scripts/gpu-owed.sh OUT_DIR runs the GPU steps still owed
# with them). Usage: scripts/gpu-bundle.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=${1:?usage: gpu-bundle.sh BUILD_DIR OUT_DIR}
out=${2:?usage: gpu-bundle.sh BUILD_DIR OUT_DIR}
mkdir -p "$out/lib"
for f in gpudiag gpudiag_tests scan_gpu_bench nccl_event_timing libgpudiag_scan.so; do
  [[ -f $build/$f ]] || continue
  cp -L "$build/$f" "$out/$f"
  strip --strip-unneeded "$out/$f" 2>/dev/null || true
done
# Shared libraries outside glibc and the CUDA driver: the ones a bare machine may miss.
ldd "$out"/gpudiag "$out"/gpudiag_tests 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
  grep -E 'spdlog|fmt|crypto|gtest|gmock' | while read -r lib; do cp -L "$lib" "$out/lib/"; done
if [[ -n ${NCCL_TESTS_BUILD:-} ]]; then
  mkdir -p "$out/nccl-tests"
  cp "$NCCL_TESTS_BUILD"/*_perf "$out/nccl-tests/"
  strip --strip-unneeded "$out"/nccl-tests/* 2>/dev/null || true
fi
du -sh "$out"
