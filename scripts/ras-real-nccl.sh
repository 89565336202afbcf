#!/usr/bin/env bash
# NCCL's RAS, for real: 4 ranks of a real NCCL (2.24 or later) on this GPU machine (all on
# the first GPU, each its own NCCL_HOSTID, sockets on lo, when there are fewer than 4), and
#   A. torch (backend nccl), rank 3 asleep before its 6th all-reduce (tests/fixtures/torch/
#      nccl_hang.py): the protocol's conformance suite (tests/integration/ras_protocol.py)
#      against the ranks' RAS socket, `gpudiag ras` naming rank 3 one AllReduce behind, and
#      `gpudiag launch --hang-timeout`'s report naming it by the launcher's name;
#   B. gpudiag check --backend nccl, rank 3 SIGSTOPped at its 3rd timed all-reduce
#      (GPUDIAG_TEST_RAISE): `gpudiag ras` naming its process unresponsive, past the silent
#      connections the stopped process takes, and the SIGUSR1 report naming it.
# Every step without what it needs (a GPU, NCCL 2.24+, torch with CUDA) says SKIPPED and why.
# Usage: scripts/ras-real-nccl.sh [BUILD_DIR]  (default build-gpu, else build); logs go to
# $GPUDIAG_GPU_LOGS/ras (default $OUT/ras, else ./gpu-logs/ras). Exit 0 when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
build=${1:-${GPUDIAG_BUILD_DIR:-build-gpu}}
[[ -x $build/gpudiag ]] || build=build
bin=$root/$build/gpudiag
[[ $build = /* ]] && bin=$build/gpudiag
logs=${GPUDIAG_GPU_LOGS:-${OUT:-gpu-logs}}/ras
mkdir -p "$logs" && logs=$(cd "$logs" && pwd)
status=0
say() { echo "$*" | tee -a "$logs/summary.txt"; }
pass() { say "   PASS $*"; }
fail() { say "   FAIL $*"; status=1; }
skip() { say "   SKIPPED: $*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for FILE REGEX SECONDS: until a line of FILE matches (an event, not a guess).
wait_for() { local i; for ((i = 0; i < $3 * 5; i++)); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done; return 1; }
: >"$logs/summary.txt"

[[ -x $bin ]] || { say "ras-real-nccl: no gpudiag binary at $bin (build first)"; exit 1; }
if ! nvidia-smi -L >"$logs/nvidia-smi.txt" 2>&1; then skip "no NVIDIA GPU here (nvidia-smi failed)"; exit 0; fi
ngpu=$(grep -c '^GPU' "$logs/nvidia-smi.txt")
"$bin" info >"$logs/info.txt" 2>&1
nccl=$(grep -E '^  nccl ' "$logs/info.txt" | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
say "== NCCL ${nccl:-not found} on $ngpu GPU(s); logs in $logs"
if [[ -z $nccl ]] || [[ $(printf '%s\n2.24.0\n' "$nccl" | sort -V | head -1) != 2.24.0 ]]; then
  skip "the NCCL gpudiag loads (${nccl:-none}) has no RAS (2.24 or later needed; GPUDIAG_NCCL_LIB names another)"
  exit 0
fi
one_gpu=(); ((ngpu >= 4)) || one_gpu=(--one-gpu)
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1

say "== A. torch, backend nccl: rank 3 asleep before its 6th all-reduce"
torch_nccl=$(python3 -c 'import torch; assert torch.cuda.is_available() and torch.distributed.is_nccl_available(); print(".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null)
if [[ -z $torch_nccl ]]; then
  skip "python3 has no torch with CUDA and NCCL"
elif [[ $(printf '%s\n2.24.0\n' "$torch_nccl" | sort -V | head -1) != 2.24.0 ]]; then
  skip "torch's NCCL $torch_nccl has no RAS (2.24 or later needed)"
else
  say "   torch's NCCL: $torch_nccl"
  port=$(free_port)
  NCCL_RAS_ADDR=127.0.0.1:$port "$bin" launch --nproc-per-node 4 --hang-timeout 20 \
    tests/fixtures/torch/nccl_hang.py "${one_gpu[@]}" --hang-rank 3 --hang-step 5 \
    >"$logs/a-launch.out" 2>"$logs/a-launch.err" &
  launcher=$!
  if wait_for "$logs/a-launch.out" 'rank 3 sleeping at step 5' 120; then
    (cd tests/integration && GPUDIAG_RAS_REAL=127.0.0.1:$port GPUDIAG_BIN=$bin \
      timeout 120 python3 -m unittest -v test_ras_protocol) >"$logs/a-conformance.txt" 2>&1 &&
      pass "the conformance suite against NCCL $torch_nccl's RAS" ||
      fail "the conformance suite against NCCL $torch_nccl's RAS (a-conformance.txt): the model is wrong there"
    timeout 60 "$bin" ras "127.0.0.1:$port" --json "$logs/a-ras.json" >"$logs/a-ras.txt" 2>&1
    rc=$?
    grep -qE '^mismatch: .*AllReduce counts differ: .*; behind: rank 3$' "$logs/a-ras.txt" && ((rc == 1)) &&
      pass "gpudiag ras names rank 3 one AllReduce behind" ||
      fail "gpudiag ras (exit $rc) did not name rank 3 behind (a-ras.txt)"
  else
    fail "rank 3 never reached its sleep (a-launch.out, a-launch.err)"
  fi
  wait "$launcher"
  rc=$?
  grep -A3 'NCCL RAS at' "$logs/a-launch.err" | tee -a "$logs/summary.txt"
  grep -qE '^  mismatch: .*rank 3 \(rank 3 \[[^]]+-3\] pid [0-9]+\) issued [0-9]+; behind: rank 3$' "$logs/a-launch.err" && ((rc == 3)) &&
    pass "the hang report names rank 3 behind by the launcher's name" ||
    fail "the hang report (exit $rc) did not name rank 3 behind (a-launch.err)"
fi

say "== B. gpudiag check --backend nccl: rank 3 SIGSTOPped in its 3rd timed all-reduce"
port=$(free_port)
wrapper=$logs/rank-wrapper.sh
printf '#!/bin/sh\nexport NCCL_HOSTID="r$RANK"\necho $$ >"%s/rank$RANK.pid"\nexec "%s" "$@"\n' "$logs" "$bin" >"$wrapper"
chmod +x "$wrapper"
rm -f "$logs"/rank*.pid
dev=(); ((ngpu >= 4)) || dev=(--device 0)
NCCL_RAS_ADDR=127.0.0.1:$port GPUDIAG_TEST_RAISE="SIGSTOP@all-reduce#3:3" \
  "$bin" launch --nproc-per-node 4 --grace 5 --no-python -- "$wrapper" check --backend nccl \
  "${dev[@]}" --mem 1MiB --iters 10 --timeout 40 >"$logs/b-launch.out" 2>"$logs/b-launch.err" &
launcher=$!
stopped=""
for ((i = 0; i < 600; i++)); do
  pid=$(cat "$logs/rank3.pid" 2>/dev/null)
  [[ -n $pid ]] && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == T ]] && { stopped=$pid; break; }
  sleep 0.2
done
if [[ -n $stopped ]]; then
  timeout 60 "$bin" ras "127.0.0.1:$port" --timeout 3 --json "$logs/b-ras.json" >"$logs/b-ras.txt" 2>&1
  rc=$?
  grep -qE "^unresponsive: process $stopped on " "$logs/b-ras.txt" && ((rc == 1)) &&
    pass "gpudiag ras names the stopped rank's process ($stopped) unresponsive" ||
    fail "gpudiag ras (exit $rc) did not name process $stopped unresponsive (b-ras.txt)"
  kill -USR1 "$launcher"
  wait_for "$logs/b-launch.err" 'NCCL RAS at .*SIGUSR1' 60  # one write: its lines come with it
  grep -qE "^  unresponsive: rank 3 \[[^]]+-3\] pid $stopped " "$logs/b-launch.err" &&
    pass "the SIGUSR1 report names rank 3 unresponsive" ||
    fail "the SIGUSR1 report did not name rank 3 unresponsive (b-launch.err)"
  kill -CONT "$stopped"
else
  fail "rank 3 never stopped itself (b-launch.err): does this gpudiag read GPUDIAG_TEST_RAISE?"
fi
wait "$launcher"
grep -A3 'NCCL RAS at' "$logs/b-launch.err" | tee -a "$logs/summary.txt"
say "== done: exit $status"
exit $status
