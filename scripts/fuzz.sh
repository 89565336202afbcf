#!/usr/bin/env bash
# Builds the dump-reader and store-wire fuzzers with clang in their own build directory and
# runs each for a bounded time, seeded with the test corpus.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [BUILD_DIR]     (defaults: 30, build-fuzz)
#
# Exit status 0 when every target ran its time without a crash, a leak, a
# timeout (5 s per input) or an allocation over 512 MiB; libFuzzer's report
# and the crashing input (crash-*) are left in the build directory otherwise.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
secs=${1:-30}
build=${2:-$root/build-fuzz}
cxx=${FUZZ_CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "fuzz.sh: $cxx not found (Debian: clang libclang-rt-14-dev)" >&2; exit 2; }

# A build folder configured from another source folder (an older layout) is made anew.
if [[ -f $build/CMakeCache.txt ]] &&
   ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$root/src/fuzz" "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi
cmake -S "$root/src/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

seeds=$root/tests/data/numerics/corpus
for target in safetensors npy store_wire; do
  corpus=$build/corpus-$target
  mkdir -p "$corpus"
  find "$seeds" -name "*.$target" -exec cp {} "$corpus/" \;
  echo "fuzz.sh: fuzz_$target for ${secs}s"
  status=0
  (cd "$build" && "./fuzz_$target" -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 \
       -malloc_limit_mb=512 -max_len=65536 -print_final_stats=1 "$corpus" >"fuzz_$target.log" 2>&1) ||
    status=$?
  grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$build/fuzz_$target.log" || true
  if [[ $status -ne 0 ]]; then
    tail -n 40 "$build/fuzz_$target.log" >&2
    echo "fuzz.sh: fuzz_$target failed (status $status); log and crash-* input in $build" >&2
    exit 1
  fi
done
echo "fuzz.sh: all targets clean"
