#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: build for the GPUs present, then run what
# only a GPU can prove, and keep the logs. Stops if the build fails; after
# that every step runs, and its exit status goes into summary.txt.
#   1. build for the compute capabilities nvidia-smi reports
#   1b. with NCCL_TESTS set: gpudiag bench against nccl-tests' binaries, every OP
#   2. the GPU-only unit tests, then every unit test (ctest -L unit)
#   3. gpudiag scan --device cuda (--gpu) against the CPU scanner, --device
#      auto's measured choice, scan_gpu_bench (kernel vs D2D, pipeline vs H2D for
#      the windows and pread readers)
#   4. gpudiag info, gpudiag check --backend nccl with world size 1, and on
#      every GPU with --nccl-debug info, then gpudiag nccl-log on the capture
#   5. gpudiag bench --backend nccl on every GPU, its timing against two CUDA
#      events around a loop of the same call (bench/nccl_event_timing.py), and
#      its link test
#   6. a second NCCL (PyTorch's) through --nccl-lib: info, and check on every
#      GPU (4 ranks on the one GPU when there is only one)
#   7. 4 ranks on one GPU (each its own NCCL_HOSTID, sockets over lo): check
#      (also as 2 nodes under node leaders, GPUDIAG_TREE=on),
#      bench, bench --links, sweep (each rank its own host name)
#   8. faults on that GPU: a rank SIGKILLed, then a rank SIGSTOPped, inside
#      the all-reduce: the others must name it, the job end, the GPU be freed
#   9. NCCL's RAS against a real NCCL (scripts/ras-real-nccl.sh): the protocol's
#      conformance suite, gpudiag ras and launch's reports naming a rank behind or stopped
# Logs go to $GPUDIAG_GPU_LOGS (default $OUT if set, else ./gpu-logs).
# GPUDIAG_CUDA_ARCHS overrides the architectures (e.g. "90;100");
# GPUDIAG_SECOND_NCCL names the second libnccl.so.2 instead of PyTorch's.
# GPUDIAG_PREBUILT=1 skips step 1 and uses the binaries already in the build
# folder (built elsewhere for these GPUs, e.g. where the dependencies are),
# with the libraries in its lib/ folder; GPUDIAG_GPU_QUICK=1 skips the run of
# every unit test (the GPU-only ones still run).
# When the loader finds no libnccl.so.2 and GPUDIAG_NCCL_LIB is unset, the
# second NCCL (below) is used for every step, and the summary says so.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
logs=${GPUDIAG_GPU_LOGS:-${OUT:-gpu-logs}}
mkdir -p "$logs" && logs=$(cd "$logs" && pwd)  # absolute: the rank wrapper and ranks use it
build=${GPUDIAG_BUILD_DIR:-build-gpu}
[[ $build = /* ]] || build=$root/$build
bin=$build/gpudiag
status=0
: >"$logs/summary.txt"
say() { echo "$*" | tee -a "$logs/summary.txt"; }
step() { say "== $*"; }
# want SECTION: GPUDIAG_GPU_STEPS (e.g. "contract,onegpu,faults") picks sections
# for a short lease; unset runs all: contract nccltests unit scan nccl second onegpu faults ras.
want() { [[ -z ${GPUDIAG_GPU_STEPS:-} || ,$GPUDIAG_GPU_STEPS, == *,$1,* ]]; }
# 1 means a slow link was found: a finding about the machine, not a failure of the tool.
links_rc() { local rc=$1 file=$2; [[ $rc -eq 1 ]] && grep -q 'slow links\? (below' "$file" && rc=0; echo "$rc"; }
record() { local rc=$1; say "   exit $rc"; [[ $rc -eq 0 ]] || status=1; }
die() { say "gpu-check: $*"; exit 1; }
# run NAME SECONDS CMD...: CMD with a time limit, its output in $logs/NAME.txt.
run() { local name=$1 limit=$2; shift 2; timeout -k 10 "$limit" "$@" >"$logs/$name.txt" 2>&1; }

nvidia-smi -L | tee "$logs/nvidia-smi.txt" || die "nvidia-smi failed: no NVIDIA driver here?"
ngpu=$(grep -c '^GPU' "$logs/nvidia-smi.txt")
((ngpu > 0)) || die "nvidia-smi lists no GPU"
# The GPUs a process sees here: nvidia-smi lists them all, CUDA_VISIBLE_DEVICES may hide some.
if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
  ngpu=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  ((ngpu > 0)) || die "CUDA_VISIBLE_DEVICES is empty: no GPU is visible"
fi
# "9.0" -> "90", "12.0" -> "120": what CMAKE_CUDA_ARCHITECTURES wants, one per kind of GPU
# (=native would need CMake 3.24 and a GPU visible to the configure step).
archs=${GPUDIAG_CUDA_ARCHS:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader |
  tr -d ' .' | sort -u | paste -sd ';' -)}
[[ $archs =~ ^[0-9]+(\;[0-9]+)*$ ]] ||
  die "cannot read the compute capabilities from nvidia-smi ('$archs'); set GPUDIAG_CUDA_ARCHS, e.g. 90"

if [[ -n ${GPUDIAG_PREBUILT:-} ]]; then
  step "build: skipped (GPUDIAG_PREBUILT), using $build"
  # Libraries the build machine had and this one may not (spdlog, fmt), beside the binaries.
  [[ -d $build/lib ]] && export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [[ -x $bin && -x $build/gpudiag_tests ]] || die "GPUDIAG_PREBUILT is set but $build holds no gpudiag and gpudiag_tests"
  missing=$(ldd "$bin" "$build/gpudiag_tests" 2>&1 | grep 'not found' | sort -u)
  [[ -z $missing ]] || die "the prebuilt binaries miss libraries here: $missing"
else
  step "build ($build, CUDA architectures $archs)"
  GPUDIAG_BUILD_DIR=$build scripts/build.sh "-DCMAKE_CUDA_ARCHITECTURES=$archs" \
    >"$logs/build.txt" 2>&1
  rc=$?
  record $rc
  ((rc == 0)) || die "the build failed (exit $rc), see $logs/build.txt; nothing else ran"
  grep -q 'gpudiag: CUDA ON' "$logs/build.txt" ||
    die "configured without CUDA (see $logs/build.txt): set CUDA_HOME or CUDAToolkit_ROOT"
  [[ -x $bin && -x $build/gpudiag_tests ]] || die "the build left no $bin or gpudiag_tests"
fi

# A second NCCL: the one PyTorch ships (pip's nvidia-nccl, else torch/lib), found
# without importing torch.
second_nccl() {
  python3 - 2>/dev/null <<'EOF'
import glob, importlib.util, os
for name, pattern in (("nvidia.nccl", "lib/libnccl.so.2"), ("torch", "lib/libnccl*.so*")):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        continue
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(glob.glob(os.path.join(folder, pattern))):
            print(path)
            raise SystemExit
EOF
}
nccl2=${GPUDIAG_SECOND_NCCL:-$(second_nccl)}
# The NCCL every step loads: the loader's, else (said so) the second one.
if [[ -z ${GPUDIAG_NCCL_LIB:-} ]] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  if [[ -n $nccl2 && -f $nccl2 ]]; then
    export GPUDIAG_NCCL_LIB=$nccl2
    say "== the loader finds no libnccl.so.2: every step uses GPUDIAG_NCCL_LIB=$nccl2"
  else
    say "== the loader finds no libnccl.so.2 and there is no second NCCL: the NCCL steps will fail"
  fi
fi

if want contract; then
# The NCCL contract (src/comm/nccl_contract_test.cpp) against the real NCCL,
# before anything else: where it and the model disagree, the model is wrong,
# and every NCCL test on machines without a GPU is suspect until fixed.
# One rank, then four on the first GPU (each its own NCCL_HOSTID, sockets on lo).
step "NCCL contract suite against real NCCL: 1 rank"
GPUDIAG_NCCL_CONTRACT=real run contract-1 300 "$build/gpudiag_tests" --gtest_filter='*NcclContract*'
record $?
grep -E '^\[ +(SKIPPED|FAILED|PASSED|OK) +\]' "$logs/contract-1.txt" | tee -a "$logs/summary.txt"
step "NCCL contract suite against real NCCL: 4 ranks on one GPU"
contract_dir=$(mktemp -d)
rank_env=$logs/rank-env.sh
printf '#!/bin/sh\nexport NCCL_HOSTID="r$RANK"\nexec "$@"\n' >"$rank_env"
chmod +x "$rank_env"
GPUDIAG_NCCL_CONTRACT=real GPUDIAG_CONTRACT_DIR=$contract_dir NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
  run contract-4 400 "$bin" launch --nproc-per-node 4 --no-gpudiag -- \
  "$rank_env" "$build/gpudiag_tests" --gtest_filter='*NcclContract*'
record $?
grep -E '\[ +(SKIPPED|FAILED|PASSED) +\]' "$logs/contract-4.txt" | tee -a "$logs/summary.txt"
rm -rf "$contract_dir"
# The rules about NCCL's environment, each in a process started with it
# (NCCL reads some once a process): NCCL_COMM_BLOCKING, NCCL_COMM_ID, and a
# used id's refused connection with NCCL's retries cut to one.
for env_rule in NCCL_COMM_BLOCKING=1:NcclCommBlocking NCCL_COMM_ID=127.0.0.1:29517:NcclCommId \
                NCCL_SOCKET_RETRY_CNT=1:AnIdAlreadyUsed; do
  step "NCCL contract, 1 rank, with ${env_rule%:*}"
  (export GPUDIAG_NCCL_CONTRACT=real "${env_rule%:*}"
   run "contract-env-${env_rule##*:}" 120 "$build/gpudiag_tests" \
     --gtest_filter="*NcclContract*${env_rule##*:}*")
  record $?
  grep -E '^\[ +(SKIPPED|FAILED|PASSED|OK) +\]' "$logs/contract-env-${env_rule##*:}.txt" |
    tee -a "$logs/summary.txt"
done
# NCCL_COMM_ID with several bootstrap roots (ncclCommInitRankScalable) needs 2+ ranks.
step "NCCL contract, 2 ranks on one GPU, with NCCL_COMM_ID and several roots"
contract_dir=$(mktemp -d)
NCCL_COMM_ID=127.0.0.1:29519 GPUDIAG_NCCL_CONTRACT=real GPUDIAG_CONTRACT_DIR=$contract_dir \
  NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 \
  run contract-commid-2 120 "$bin" launch --nproc-per-node 2 --no-gpudiag -- \
  "$rank_env" "$build/gpudiag_tests" --gtest_filter='*NcclContractScalable*CommId*'
record $?
grep -E '\[ +(SKIPPED|FAILED|PASSED) +\]' "$logs/contract-commid-2.txt" | tee -a "$logs/summary.txt"
rm -rf "$contract_dir"

fi
if want nccltests; then
# Issue 33: every size against nccl-tests itself at one rank (bench/vs_nccl_tests.py;
# nccl-tests built beforehand, its binaries in $NCCL_TESTS), then the one meter's
# figures at 4 ranks on one GPU through the check (its single timed call).
if [[ -n ${NCCL_TESTS:-} && -x ${NCCL_TESTS}/all_reduce_perf ]]; then
  step "gpudiag bench vs nccl-tests ($NCCL_TESTS), 1 rank, every OP, 8 B to 1 GiB"
  GPUDIAG_BIN=$bin run vs-nccl-tests 420 python3 bench/vs_nccl_tests.py --repeat ${GPUDIAG_VS_REPEAT:-2}
  record $?
  tee -a "$logs/summary.txt" <"$logs/vs-nccl-tests.txt"
else
  say "== vs nccl-tests: skipped (set NCCL_TESTS to a folder with nccl-tests' *_perf binaries)"
fi

fi
if want unit; then
step "GPU unit tests"
run unit-gpu 300 "$build/gpudiag_tests" \
  --gtest_filter='Device*:Cuda*:*Gpu*:*Nccl*Capture*:*CudaScan*:ScanPlan*:ScanRing*:ScanAuto*:StagingFiles*'
record $?
grep -E '^\[ +(SKIPPED|FAILED|PASSED) +\]' "$logs/unit-gpu.txt" | tee -a "$logs/summary.txt"
if [[ -n ${GPUDIAG_GPU_QUICK:-} ]]; then  # CI runs them on every change; a short GPU lease may not
  say "== all unit tests: skipped (GPUDIAG_GPU_QUICK)"
elif [[ -n ${GPUDIAG_PREBUILT:-} ]]; then  # ctest's files name the folder it was built in
  step "all unit tests (gpudiag_tests)"
  run unit-all 300 "$build/gpudiag_tests"
  record $?
  grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests ran' "$logs/unit-all.txt" | tail -8
else
  step "all unit tests (ctest -L unit)"
  run unit-all 300 ctest --test-dir "$build" -L unit -j "$(nproc)" --timeout 120 --output-on-failure
  record $?
  tail -3 "$logs/unit-all.txt"
fi

fi
if want scan; then
# scan NAME ARGS...: gpudiag scan with its report in NAME.out and its log in NAME.err.
scan() {
  local name=$1
  shift
  timeout -k 10 120 "$bin" --log-level info scan "$@" >"$logs/$name.out" 2>"$logs/$name.err"
}
# compare NAME FILES...: the CUDA scanner on the last visible GPU against the CPU scanner.
compare() {
  local name=$1 cpu_rc cuda_rc rc=0
  shift
  scan "$name-cpu" --device cpu "$@"
  cpu_rc=$?
  scan "$name-cuda" --device cuda --gpu $((ngpu - 1)) "$@"
  cuda_rc=$?
  say "   exit $cuda_rc on the GPU, $cpu_rc on the CPU; $(grep -o 'scanner cuda.*' "$logs/$name-cuda.err")"
  ((cpu_rc == cuda_rc)) && cmp -s "$logs/$name-cpu.out" "$logs/$name-cuda.out" || rc=1
  grep -q "device $((ngpu - 1)))" "$logs/$name-cuda.err" || rc=1
  record $rc
}
step "gpudiag scan --device cuda --gpu $((ngpu - 1)): the same report as the CPU scanner"
compare scan-corpus tests/data/numerics/corpus/valid/{loose.safetensors,bool.npy,fortran.npy,v1.npy,v2.npy,v3.npy}
# Tensors of several 64 MiB chunks, with a few inf, when numpy is there to write them.
big=$(mktemp -d)
if python3 - "$big" 2>/dev/null <<'EOF'; then
import sys, numpy as np
rng = np.random.default_rng(1)
a = rng.standard_normal(80 << 20, dtype=np.float32).astype(np.float16)  # 160 MiB
a[[5, 70 << 20]] = np.inf
np.save(sys.argv[1] + "/half.npy", a)
b = rng.integers(-2**31, 2**31, 20 << 20, dtype=np.int64).astype(">i4")  # 80 MiB, big-endian
np.save(sys.argv[1] + "/ints.npy", b)
EOF
  step "gpudiag scan --device cuda on 240 MiB of tensors (several chunks each)"
  compare scan-big "$big/half.npy" "$big/ints.npy"
else
  say "== scan of large tensors: skipped (no numpy for python3)"
fi
rm -rf "$big"
step "gpudiag scan --device auto: the choice it measured (issue 15)"
scan scan-auto --device auto tests/data/numerics/corpus/valid/loose.safetensors
rc=$?
((rc <= 1)) && grep -q -- '--device auto' "$logs/scan-auto.err" && rc=0  # 1: inf/nan in the corpus
record $rc
grep -- '--device auto' "$logs/scan-auto.err" | tee -a "$logs/summary.txt"
step "scan_gpu_bench: kernel vs memory read, 2x D2D (target >= 0.85), file pipeline vs pinned H2D (>= 0.80), the windows and pread readers side by side"
if [[ -x $build/scan_gpu_bench ]]; then
  run scan-gpu-bench 300 "$build/scan_gpu_bench" --dir "${TMPDIR:-/tmp}" --reader both
  record $?
  tee -a "$logs/summary.txt" <"$logs/scan-gpu-bench.txt"
else
  say "   no $build/scan_gpu_bench"
  record 1
fi
step "gpudiag scan --device cuda --gpu $ngpu is refused (exit 2, one line)"
scan scan-bad-gpu --device cuda --gpu "$ngpu" tests/data/numerics/corpus/valid/v2.npy
rc=$?
cat "$logs/scan-bad-gpu.err"
((rc == 2)) && grep -q "only $ngpu CUDA device" "$logs/scan-bad-gpu.err" && rc=0 || rc=1
record $rc

fi
if want nccl; then
step "gpudiag info"
run info 60 "$bin" info
record $?
step "gpudiag check --backend nccl (world size 1)"
run check-1 120 "$bin" check --backend nccl --json "$logs/check-1.json"
record $?
cat "$logs/check-1.txt"

step "gpudiag check --backend nccl on $ngpu GPUs with --nccl-debug info"
run check-n 180 "$bin" launch --nproc-per-node "$ngpu" -- check --backend nccl \
  --nccl-debug info --nccl-debug-dir "$logs/nccl" --json "$logs/check-n.json"
record $?
cat "$logs/check-n.txt"
step "gpudiag nccl-log on the captured logs"
run nccl-log 60 "$bin" nccl-log "$logs/nccl"
record $?

step "gpudiag bench --backend nccl on $ngpu GPUs"
run bench 180 "$bin" launch --nproc-per-node "$ngpu" -- bench --backend nccl --min 1MiB --max 256MiB
record $?
cat "$logs/bench.txt"
# Every collective on NCCL (issue 13): nccl-tests' rows, every size checked.
for op in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  step "gpudiag bench $op --backend nccl on $ngpu GPUs (-b 8 -e 256M -f 4)"
  run "bench-$op" 180 "$bin" launch --nproc-per-node "$ngpu" -- bench "$op" --backend nccl \
    -b 8 -e 256M -f 4 -J "$logs/bench-$op.json"
  record $?
  grep -v '^\[rank0\]: #  Rank' "$logs/bench-$op.txt" | tail -25
done
step "gpudiag bench all_reduce -d all -o all --backend nccl (every type and reduction, exact)"
run bench-types 300 "$bin" launch --nproc-per-node "$ngpu" -- bench all_reduce --backend nccl \
  -b 1K -e 1M -f 32 -d all -o all -n 5
record $?
tail -8 "$logs/bench-types.txt"

# Issue 13: the bench's NCCL timing (an event after each call, one wait) against
# nccl-tests' (two events around the loop) on the same calls, within 10% from 1 MiB.
step "gpudiag bench's NCCL timing vs two events around the loop (bench/nccl_event_timing.py)"
if [[ -x $build/nccl_event_timing ]]; then
  GPUDIAG_BIN=$bin run nccl-timing 400 python3 bench/nccl_event_timing.py --repeat 3
  record $?
  tee -a "$logs/summary.txt" <"$logs/nccl-timing.txt"
else
  say "   no $build/nccl_event_timing"
  record 1
fi

step "gpudiag bench --links --backend nccl on $ngpu GPUs"
run links 180 "$bin" launch --nproc-per-node "$ngpu" -- bench --links --backend nccl \
  --link-size 256MiB --json "$logs/links.json"
rc=$?
record "$(links_rc $rc "$logs/links.txt")"
cat "$logs/links.txt"

fi
# Several ranks on one GPU. NCCL refuses two ranks of one host on one GPU but
# tells hosts apart by NCCL_HOSTID, so each rank gets its own and NCCL connects
# them over its network transport (sockets on lo). gpudiag launch runs a program
# other than gpudiag only with --no-gpudiag; then rank 0 serves the store (the
# launcher does not), and the store announces the death of a rank whose
# connection closes without a goodbye. With RANK_PID_DIR set, the
# wrapper also notes each rank's pid (exec keeps it) for the fault runs.
wrapper=$logs/rank-wrapper.sh
cat >"$wrapper" <<EOF
#!/bin/sh
export NCCL_HOSTID="r\$RANK"
[ -z "\${RANK_PID_DIR:-}" ] || echo \$\$ >"\$RANK_PID_DIR/rank\$RANK.pid"
exec "$bin" "\$@"
EOF
chmod +x "$wrapper"
# The GPU: the first visible one. "Visible" keeps the caller's CUDA_VISIBLE_DEVICES
# (unset on a plain machine: every GPU, and --device 0 puts all 4 ranks on GPU 0).
first_gpu=${CUDA_VISIBLE_DEVICES:-0}
first_gpu=${first_gpu%%,*}
one_gpu=(env NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 "$bin" launch --nproc-per-node 4 --no-gpudiag)

if want second; then
if [[ -n $nccl2 && -f $nccl2 ]]; then
  step "second NCCL $nccl2: gpudiag info --nccl-lib"
  run info-nccl2 60 "$bin" info --nccl-lib "$nccl2"
  record $?
  grep -i nccl "$logs/info-nccl2.txt"
  if ((ngpu > 1)); then
    step "second NCCL: gpudiag check --backend nccl --nccl-lib on $ngpu GPUs"
    run check-nccl2 180 "$bin" launch --nproc-per-node "$ngpu" -- check --backend nccl \
      --nccl-lib "$nccl2" --json "$logs/check-nccl2.json"
  else  # one rank would not run a collective through NCCL: four on the one GPU
    step "second NCCL: gpudiag check --backend nccl --nccl-lib, 4 ranks on one GPU"
    run check-nccl2 180 "${one_gpu[@]}" -- "$wrapper" check --backend nccl --device 0 \
      --nccl-lib "$nccl2" --json "$logs/check-nccl2.json"
  fi
  record $?
  cat "$logs/check-nccl2.txt"
else
  say "== second NCCL: none found (no nvidia.nccl or torch for python3; set GPUDIAG_SECOND_NCCL)"
fi

fi
if want onegpu; then
step "4 ranks on one GPU: check --backend nccl (CUDA_VISIBLE_DEVICES=$first_gpu)"
run check-1gpu 180 env CUDA_VISIBLE_DEVICES="$first_gpu" "${one_gpu[@]}" -- "$wrapper" \
  check --backend nccl --json "$logs/check-1gpu.json"
record $?
cat "$logs/check-1gpu.txt"
step "4 ranks on one GPU: check --backend nccl --device 0 (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset})"
run check-1gpu-dev0 180 "${one_gpu[@]}" -- "$wrapper" check --backend nccl --device 0 \
  --json "$logs/check-1gpu-dev0.json"
record $?
cat "$logs/check-1gpu-dev0.txt"
# Node leaders (GPUDIAG_TREE, docs/rendezvous.md): the 4 ranks as 2 "nodes"
# of 2, each node's store on a port of its own; rank 0's NCCL id reaches the
# other node through the digest.
tree_wrapper=$logs/tree-wrapper.sh
cat >"$tree_wrapper" <<EOF
#!/bin/sh
export LOCAL_WORLD_SIZE=2 LOCAL_RANK=\$((RANK % 2)) GPUDIAG_TREE=on
export GPUDIAG_TREE_PORT=\$((MASTER_PORT + 10 + 2 * (RANK / 2)))
exec "$wrapper" "\$@"
EOF
chmod +x "$tree_wrapper"
step "4 ranks on one GPU as 2 nodes under leaders: GPUDIAG_TREE=on check --backend nccl --device 0"
run check-1gpu-tree 180 "${one_gpu[@]}" -- "$tree_wrapper" check --backend nccl --device 0 \
  --json "$logs/check-1gpu-tree.json"
record $?
cat "$logs/check-1gpu-tree.txt"
step "4 ranks on one GPU: bench --backend nccl --device 0 --max 256MiB"
run bench-1gpu 180 "${one_gpu[@]}" -- "$wrapper" bench --backend nccl --device 0 \
  --min 1MiB --max 256MiB
record $?
cat "$logs/bench-1gpu.txt"
step "4 ranks on one GPU: bench --links --backend nccl --device 0"
run links-1gpu 180 "${one_gpu[@]}" -- "$wrapper" bench --links --backend nccl --device 0 \
  --link-size 32MiB --json "$logs/links-1gpu.json"
rc=$?
record "$(links_rc $rc "$logs/links-1gpu.txt")"
cat "$logs/links-1gpu.txt"

# gpudiag sweep with NCCL pairs: each rank its own "node" (its own host name in
# a UTS namespace, and its own NCCL_HOSTID), so the sweep runs node-pair rounds
# of two-rank NCCL communicators. Exit 1 with a node named is a finding.
if unshare --uts true 2>/dev/null; then
  node_wrapper=$logs/node-wrapper.sh
  # One rank per "node": its launcher's local size and rank are those of a node of one.
  printf '#!/bin/sh\nexport LOCAL_WORLD_SIZE=1 LOCAL_RANK=0\nexec unshare --uts sh -c "hostname gpunode\\$RANK; exec \\"\\$0\\" \\"\\$@\\"" "%s" "$@"\n' \
    "$wrapper" >"$node_wrapper"
  chmod +x "$node_wrapper"
  step "4 ranks on one GPU as 4 nodes: sweep --backend nccl --device 0"
  run sweep-1gpu 180 "${one_gpu[@]}" -- "$node_wrapper" sweep --backend nccl --device 0 \
    --size 32MiB --json "$logs/sweep-1gpu.json" --prometheus "$logs/sweep-1gpu.prom"
  rc=$?
  [[ $rc -eq 1 ]] && grep -q '^exclude ' "$logs/sweep-1gpu.txt" && rc=0
  record $rc
  cat "$logs/sweep-1gpu.txt"
else
  say "== sweep on one GPU: skipped (unshare --uts is not allowed here)"
fi

# Every collective at 4 ranks (issue 28): NCCL's threaded launch at 2+ ranks.
for op in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  step "4 ranks on one GPU: bench $op --backend nccl --device 0 (-b 8 -e 64M -f 8)"
  run "bench-1gpu-$op" 180 "${one_gpu[@]}" -- "$wrapper" bench "$op" --backend nccl --device 0 \
    -b 8 -e 64M -f 8 -J "$logs/bench-1gpu-$op.json"
  record $?
  grep -v '#  Rank' "$logs/bench-1gpu-$op.txt" | tail -14
done

fi
if want faults; then
# fault NAME SIGNAL VICTIM: 4 ranks on one GPU; rank VICTIM raises SIGNAL on
# itself at the start of the 3rd timed all-reduce, while the others are inside
# that collective (GPUDIAG_TEST_RAISE, src/checks/test_hook.h: the check's own
# hook, so no sleep guesses the moment). Then the job must end, each survivor's
# status line must name the victim, and no rank may be left, alive or on the GPU.
fault() {
  local name=$1 sig=$2 victim=$3 dir=$logs/$1
  local t0 rc n i r pid pids=() left=() apps="" on_gpu=0
  mkdir -p "$dir"
  t0=$SECONDS
  run "$name" 150 env RANK_PID_DIR="$dir" GPUDIAG_TEST_RAISE="SIG$sig@all-reduce#3:$victim" \
    "${one_gpu[@]}" --grace 8 -- "$wrapper" \
    check --backend nccl --device 0 --mem 1MiB --iters 10 --timeout 6
  rc=$?
  for r in 0 1 2 3; do pids+=("$(cat "$dir/rank$r.pid" 2>/dev/null)"); done
  [[ $sig == STOP && -n ${pids[$victim]} ]] && kill -CONT "${pids[$victim]}" 2>/dev/null
  say "   the launcher exited $rc after $((SECONDS - t0)) s"
  if ! grep -q "^\[rank$victim\]: .*GPUDIAG_TEST_RAISE: raising signal" "$logs/$name.txt"; then
    say "   rank $victim never raised SIG$sig: does this gpudiag read GPUDIAG_TEST_RAISE?"
    n=0
  else
    # Each survivor's status line, "[rankN]: [host-N] is broken: ... rank V ...", names the victim.
    n=$(grep -E "^\[rank[0-9]+\]: .*is broken: .*\brank $victim\b" "$logs/$name.txt" |
      grep -oE '^\[rank[0-9]+\]' | sort -u | grep -vc "^\[rank$victim\]")
    say "   survivors naming rank $victim: $n of 3"
  fi
  grep -E 'is broken' "$logs/$name.txt" | head -4 | tee -a "$logs/summary.txt"
  # Nothing left: no rank alive, none on the GPU (the driver may take a moment).
  for ((i = 0; i < 15; i++)); do
    left=()
    for pid in "${pids[@]}"; do [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    apps=$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>&1)
    on_gpu=0
    for pid in "${pids[@]}"; do [[ -n $pid ]] && grep -qw "$pid" <<<"$apps" && on_gpu=1; done
    grep -qi gpudiag <<<"$apps" && on_gpu=1
    ((${#left[@]} == 0 && on_gpu == 0)) && break
    sleep 1
  done
  echo "$apps" >"$dir/compute-apps.txt"
  say "   ranks (pids ${pids[*]}) left alive: ${left[*]:-none}; compute apps on the GPU: ${apps:-none}"
  for pid in "${left[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  ((rc != 0 && rc != 124 && n == 3 && ${#left[@]} == 0 && on_gpu == 0)) && rc=0 || rc=1
  record $rc
}
step "4 ranks on one GPU: rank 2 SIGKILLed inside the all-reduce"
fault fault-kill KILL 2
step "4 ranks on one GPU: rank 1 SIGSTOPped inside the all-reduce"
fault fault-stop STOP 1

fi
if want ras; then
# NCCL's RAS (docs/ras.md) against a real NCCL: the protocol's conformance suite, gpudiag ras
# and the launcher's reports naming a rank behind (torch, backend nccl) and a stopped one.
step "NCCL RAS against real NCCL: 4 ranks (scripts/ras-real-nccl.sh)"
GPUDIAG_GPU_LOGS=$logs timeout -k 10 500 scripts/ras-real-nccl.sh "$build" >"$logs/ras.txt" 2>&1
record $?
cat "$logs/ras/summary.txt" 2>/dev/null

fi
say "== done: exit $status (logs in $logs)"
exit $status
