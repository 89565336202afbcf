#!/usr/bin/env bash
# Every test: install what is missing (test tools included), build, run the
# unit and integration tests with ctest. Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit          only the unit tests
#   scripts/test.sh -R integration   only the integration tests
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
build=${GPUDIAG_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j "${GPUDIAG_TEST_JOBS:-2}" "$@"
