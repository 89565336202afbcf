#!/usr/bin/env bash
# Runs integration tests again and again on a busy machine, as users' nodes and
# CI machines are: a CPU hog (busy loops, or `stress-ng --cpu` where installed)
# keeps every core loaded beside them. Prints each failing run's test ids and
# the tail of its output, then one line: "loaded-check: N passed, M failed" (a
# run whose tests were skipped counts as failed: it proved nothing).
#
#   scripts/loaded-check.sh [-n RUNS] [-l HOGS] TEST [TEST ...]
#     TEST     a unittest id under tests/integration: test_launch,
#              test_launch_torch.TrainingScriptUnderLaunch.test_script_and_module_give_torchruns_losses
#     -n RUNS  how many times each test runs (default 20)
#     -l HOGS  busy processes beside them (default: 2 per core)
#
# Uses build/ (or $GPUDIAG_BUILD_DIR); build it first (scripts/build.sh).
# Exit status 0 when every run passed, 1 otherwise, 2 on a usage error.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=20 hogs=$(( $(nproc) * 2 ))
while getopts "n:l:" o; do
  case $o in
    n) runs=$OPTARG ;;
    l) hogs=$OPTARG ;;
    *) echo "usage: $0 [-n RUNS] [-l HOGS] TEST [TEST ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if (($# == 0)) || ! [[ $runs =~ ^[0-9]+$ && $hogs =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [-n RUNS] [-l HOGS] TEST [TEST ...] (RUNS and HOGS are counts)" >&2
  exit 2
fi
build=$(realpath "${GPUDIAG_BUILD_DIR:-build}")
[[ -x $build/gpudiag ]] || { echo "loaded-check: $build/gpudiag missing: run scripts/build.sh" >&2; exit 2; }

hog_pids=()
stop_hogs() { ((${#hog_pids[@]})) && kill "${hog_pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop_hogs EXIT
if command -v stress-ng >/dev/null; then
  stress-ng --cpu "$hogs" --quiet & hog_pids+=($!)
else
  for _ in $(seq 1 "$hogs"); do (while :; do :; done) & hog_pids+=($!); done
fi
echo "loaded-check: $hogs busy processes on $(nproc) cores; ${runs} run(s) of: $*"

passed=0 failed=0 log=$(mktemp)
for i in $(seq 1 "$runs"); do
  for t in "$@"; do
    if (cd tests/integration && GPUDIAG_BIN=$build/gpudiag GPUDIAG_SOURCE_DIR=$PWD/../.. \
          GPUDIAG_BUILD_DIR=$build /usr/bin/python3 -m unittest "$t") >"$log" 2>&1; then
      if grep -q "skipped=" "$log"; then  # a test that did not run proves nothing
        failed=$((failed + 1))
        echo "--- run $i: $t SKIPPED (counted as failed): $(grep -m1 -i "skip" "$log")"
        continue
      fi
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      echo "--- run $i: $t FAILED (load $(cut -d' ' -f1-3 /proc/loadavg))"
      grep -E "^(FAIL|ERROR):" "$log"
      tail -n 40 "$log"
      keep=${TMPDIR:-/tmp}/loaded-check-run$i-$$.log
      cp "$log" "$keep" && echo "--- the whole output of run $i: $keep"
    fi
  done
  echo "run $i/$runs: $passed passed, $failed failed so far (load $(cut -d' ' -f1 /proc/loadavg))"
done
rm -f "$log"
echo "loaded-check: $passed passed, $failed failed"
((failed == 0))
