#!/usr/bin/env bash
# Stops the one-node SLURM cluster that slurm-up.sh started.
set -u
dir=${GPUDIAG_SLURM_DIR:-/tmp/gpudiag-slurm}
for d in slurmd slurmctld; do
  [[ -s $dir/$d.pid ]] && kill "$(cat "$dir/$d.pid")" 2>/dev/null
done
sleep 0.5
exit 0
