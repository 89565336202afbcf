#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: build for the GPUs present, then run what
# only a GPU can prove, and keep the logs.
#   1. the GPU-only unit tests (device pattern, CUDA scanner, NCCL capture)
#   2. gpudiag info, and gpudiag check --backend nccl with world size 1
#   3. gpudiag check --backend nccl on every GPU (gpudiag launch), with
#      --nccl-debug info, then gpudiag nccl-log on what it captured
#   4. gpudiag bench --backend nccl on every GPU, and its link test
# Logs go to $GPUDIAG_GPU_LOGS (default $OUT if set, else ./gpu-logs).
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${GPUDIAG_GPU_LOGS:-${OUT:-gpu-logs}}
mkdir -p "$logs"
build=${GPUDIAG_BUILD_DIR:-build-gpu}
status=0
step() { echo "== $*" | tee -a "$logs/summary.txt"; }
record() { local rc=$1; echo "   exit $rc" | tee -a "$logs/summary.txt"; [[ $rc -eq 0 ]] || status=1; }

nvidia-smi -L | tee "$logs/nvidia-smi.txt"
ngpu=$(nvidia-smi -L | grep -c '^GPU')
step "build ($build, CUDA architectures native)"
GPUDIAG_BUILD_DIR=$build scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=native >"$logs/build.txt" 2>&1
record $?

step "GPU unit tests"
"$build/gpudiag_tests" --gtest_filter='Device*:Cuda*:*Gpu*:*Nccl*Capture*:*CudaScan*' \
  >"$logs/unit-gpu.txt" 2>&1
record $?
grep -E 'SKIPPED|FAILED|PASSED' "$logs/unit-gpu.txt" | tail -5

step "gpudiag info"
"$build/gpudiag" info >"$logs/info.txt" 2>&1; record $?
step "gpudiag check --backend nccl (world size 1)"
"$build/gpudiag" check --backend nccl --json "$logs/check-1.json" >"$logs/check-1.txt" 2>&1
record $?
cat "$logs/check-1.txt"

step "gpudiag check --backend nccl on $ngpu GPUs with --nccl-debug info"
"$build/gpudiag" launch --nproc-per-node "$ngpu" -- check --backend nccl \
  --nccl-debug info --nccl-debug-dir "$logs/nccl" --json "$logs/check-n.json" \
  >"$logs/check-n.txt" 2>&1
record $?
cat "$logs/check-n.txt"
step "gpudiag nccl-log on the captured logs"
"$build/gpudiag" nccl-log "$logs/nccl" >"$logs/nccl-log.txt" 2>&1; record $?

step "gpudiag bench --backend nccl on $ngpu GPUs"
"$build/gpudiag" launch --nproc-per-node "$ngpu" -- bench --backend nccl --min 1MiB --max 1GiB \
  >"$logs/bench.txt" 2>&1
record $?
cat "$logs/bench.txt"

step "gpudiag bench --links --backend nccl on $ngpu GPUs"
"$build/gpudiag" launch --nproc-per-node "$ngpu" -- bench --links --backend nccl \
  --link-size 256MiB --json "$logs/links.json" >"$logs/links.txt" 2>&1
rc=$?
# 1 means a slow link was found: a finding about the machine, not a failure of the tool.
[[ $rc -eq 1 ]] && grep -q 'slow links\? (below' "$logs/links.txt" && rc=0
record $rc
cat "$logs/links.txt"
exit $status
