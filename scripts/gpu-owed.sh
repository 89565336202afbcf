#!/usr/bin/env bash
# The GPU steps still owed (the meter's second pass, hardware evidence, the
# compute check, stragglers on NCCL), as one run of about 5 minutes
# on one GPU with binaries built elsewhere (scripts/gpu-bundle.sh BUILD OUT puts
# them and nccl-tests' *_perf in OUT; on the GPU machine, from the repository:
# scripts/gpu-owed.sh OUT). Four ranks share the first GPU (each its own
# NCCL_HOSTID, sockets on lo). Each step is bounded and logged in
# $GPUDIAG_GPU_LOGS (default $OUT, else ./gpu-logs); summary.txt has every
# step's exit status. The steps:
#   1. the NCCL contract at 1 and 4 ranks: the gate's rules, the abort with
#      calls queued behind an opened gate (well under the gate's cap), and the
#      communicator from several bootstrap roots (NcclContractScalable);
#   2. the aligned meter at 4 ranks: gpudiag's all_reduce_perf beside
#      nccl-tests' (bench/nccl-tests rows, 1 MiB-256 MiB), and check's timed
#      all-reduce at 256 MiB;
#   3. CUDA_LAUNCH_BLOCKING=1: bench at 4 ranks ends in seconds (no gate: its
#      launch would hold the host for the gate's cap) and marks every row ungated;
#   4. the scanner's file readers against pinned copies (scan_gpu_bench --reader
#      both, target 0.80), the readers and the replica checksum against the CPU,
#      the C ABI's device rules (CudaScanner.*, CudaChecksum.*, CudaScanDeviceScope.*);
#   5. gpudiag ras against a real NCCL's RAS with a SIGSTOPped rank (ras-real-nccl.sh B);
#   6. hardware evidence: `gpudiag info` and `info --json` on the GPU (NVML's ECC,
#      remapped rows, NVLink and clocks-event counters, the PCIe link width/speed);
#   7. the compute known-answer check: ComputeGpu.* (the fp32 GEMM bit for bit
#      with the CPU, every checksum stable), check's compute phase 10 times at
#      one rank (one checksum per precision across the runs), and PyTorch's
#      cuBLAS bf16/fp32 GEMM rate beside the phase's;
#   8. launch --stragglers on NCCL, 4 ranks on the GPU: healthy (nobody named),
#      one rank slowed by a GPU kernel of its own with the host waiting for it
#      (named), and without the wait (what a host-side timestamp cannot see: the
#      flight recorder's kernel times name it, 'on its GPU').
# Usage: gpu-owed.sh BUNDLE_DIR (gpudiag, gpudiag_tests, scan_gpu_bench, lib/, nccl-tests/).
set -uo pipefail
b=$(cd "${1:?usage: gpu-owed.sh BUNDLE_DIR}" && pwd)
export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
logs=${GPUDIAG_GPU_LOGS:-${OUT:-gpu-logs}}
mkdir -p "$logs" && logs=$(cd "$logs" && pwd)
status=0
: >"$logs/summary.txt"
say() { echo "$*" | tee -a "$logs/summary.txt"; }
run() { local name=$1 limit=$2; shift 2; say "== $name"; timeout -k 5 "$limit" "$@" >"$logs/$name.txt" 2>&1
        local rc=$?; say "   exit $rc"; [[ $rc -eq 0 ]] || status=1; return $rc; }
gtests() { grep -E '^\[ +(SKIPPED|FAILED|PASSED) +\]' "$logs/$1.txt" | tee -a "$logs/summary.txt"; }
nvidia-smi -L >"$logs/nvidia-smi.txt" 2>&1 || { say "no NVIDIA driver here"; exit 1; }
wrap=$logs/rank-env.sh
printf '#!/bin/sh\nexport NCCL_HOSTID="r$RANK"\nexec "$@"\n' >"$wrap" && chmod +x "$wrap"
four=(env NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
      "$b/gpudiag" launch --nproc-per-node 4 --no-gpudiag -- "$wrap")
cdir=$(mktemp -d)
export GPUDIAG_NCCL_CONTRACT=real GPUDIAG_CONTRACT_DIR=$cdir
run contract-1 40 "$b/gpudiag_tests" --gtest_filter='*NcclContract*'; gtests contract-1
run contract-4 70 "${four[@]}" "$b/gpudiag_tests" \
  --gtest_filter='*NcclContract.LaunchesBehind*:*NcclContract.Abort*:*NcclContractScalable*'
gtests contract-4
unset GPUDIAG_NCCL_CONTRACT GPUDIAG_CONTRACT_DIR
run bench-4 40 "${four[@]}" "$b/gpudiag" bench all_reduce --backend nccl -b 1M -e 256M -f 4 -n 20 -w 5 --device 0
if [[ -x $b/nccl-tests/all_reduce_perf ]]; then
  run nccl-tests-4 40 "${four[@]}" "$b/nccl-tests/all_reduce_perf" -b 1M -e 256M -f 4 -n 20 -w 5 -g 1
fi
run check-4 30 "${four[@]}" "$b/gpudiag" check --backend nccl --size 256MiB --iters 5 --device 0
grep -E 'all-reduce|busbw' "$logs/check-4.txt" | tail -3 | tee -a "$logs/summary.txt"
run launch-blocking-4 30 env CUDA_LAUNCH_BLOCKING=1 "${four[@]}" "$b/gpudiag" bench all_reduce --backend nccl \
  -b 1M -e 4M -f 2 -n 5 -w 1 --device 0
say "   rows marked ungated: $(grep -c '^# ungated:' "$logs/launch-blocking-4.txt")"
run scan-readers 40 "$b/scan_gpu_bench" --reader both
run gpu-units 40 "$b/gpudiag_tests" --gtest_filter='CudaScanner.*:CudaChecksum.*:CudaScanDeviceScope.*'
gtests gpu-units
GPUDIAG_GPU_LOGS=$logs run ras 60 "$(dirname "$0")/ras-real-nccl.sh" "$b"
run info 30 "$b/gpudiag" info
run info-json 30 "$b/gpudiag" info --json
grep -iE 'nvml|ecc|remap|nvlink|clock|pcie' "$logs/info.txt" | head -20 | tee -a "$logs/summary.txt"
run compute-units 60 "$b/gpudiag_tests" --gtest_filter='ComputeGpu.*'; gtests compute-units
for i in $(seq 1 10); do
  run "compute-$i" 60 "$b/gpudiag" launch --nproc-per-node 1 -- check --backend nccl --device 0 \
    --json "$logs/compute-$i.json" >/dev/null
done
python3 - "$logs" <<'PY' | tee -a "$logs/summary.txt"
import glob, json, sys
sums = {}
for f in sorted(glob.glob(sys.argv[1] + "/compute-*.json")):
    try:
        for r in json.load(open(f)).get("ranks", []):
            c = r.get("compute") or {}
            for k, v in c.items():
                if "checksum" in k:
                    sums.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
            print("   %s: %s" % (f.rsplit("/", 1)[1], json.dumps(c)[:300]))
    except (OSError, ValueError) as e:
        print("   %s: unreadable (%s)" % (f, e))
print("   distinct checksums over the runs: %s" % {k: len(v) for k, v in sums.items()})
PY
run cublas-rate 60 python3 -c '
import torch, time
for dt in (torch.bfloat16, torch.float16, torch.float32):
    a = torch.randn(8192, 8192, device="cuda", dtype=dt); b = torch.randn_like(a)
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter(); n = 20
    for _ in range(n): a @ b
    torch.cuda.synchronize(); s = time.perf_counter() - t
    print(dt, "%.1f TFLOP/s" % (2 * 8192**3 * n / s / 1e12))'
cat "$logs/cublas-rate.txt" | tee -a "$logs/summary.txt"
fx=$(cd "$(dirname "$0")/../tests/fixtures/torch" && pwd)
straggle() { local name=$1; shift
  run "$name" 120 env NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 "$b/gpudiag" launch --nproc-per-node 4 \
    --stragglers --json "$logs/$name.json" "$fx/nccl_straggler.py" --one-gpu "$@"
  grep -E '^(gpudiag launch: )?stragglers?:' "$logs/$name.txt" | tail -4 | tee -a "$logs/summary.txt"; }
straggle stragglers-healthy
straggle stragglers-slow-sync --slow-rank 2 --slow-ms 20 --sync
straggle stragglers-slow-gpu-only --slow-rank 2 --slow-ms 20
grep -q '"source": *"nccl_kernels"' "$logs/stragglers-slow-gpu-only.json" &&
  say "stragglers: the GPU-late rank named from NCCL's kernel times" ||
  say "stragglers: NCCL's kernel times named nobody in the GPU-only case (see its log)"
rm -rf "$cdir"
say "gpu-owed: $([[ $status -eq 0 ]] && echo 'every step exit 0' || echo 'a step failed')"
exit $status
