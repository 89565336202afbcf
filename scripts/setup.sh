#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and run
# `gpudiag check` on 2 local ranks (NCCL on GPUs, the host backend without).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo "setup: running gpudiag check on 2 local ranks"
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec mpirun -np 2 --oversubscribe build/gpudiag check "$@"
