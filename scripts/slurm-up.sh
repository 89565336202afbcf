#!/usr/bin/env bash
# Starts a one-node SLURM cluster on this machine (munged, slurmctld, slurmd)
# without systemd, for gpudiag's SLURM tests and for trying the sbatch
# examples in slurm/. Everything lives under $GPUDIAG_SLURM_DIR
# (default /tmp/gpudiag-slurm); nothing in /etc is changed.
#
#   eval "$(scripts/slurm-up.sh)"     starts (or reuses) it and exports SLURM_CONF
#   scripts/slurm-down.sh             stops it
#
# Needs root and the Debian packages slurm-wlm and munge (install-deps.sh --test).
set -euo pipefail
dir=${GPUDIAG_SLURM_DIR:-/tmp/gpudiag-slurm}
node=$(hostname -s)
conf=$dir/slurm.conf
mkdir -p "$dir"/{state,spool,log,munge}

if [[ $(id -u) -ne 0 ]]; then
  echo "slurm-up: must run as root (slurmd launches jobs as their users)" >&2
  exit 1
fi
for p in munged slurmctld slurmd srun; do
  command -v "$p" >/dev/null || { echo "slurm-up: $p missing: run scripts/install-deps.sh --test" >&2; exit 1; }
done

cat > "$conf" <<CONF
ClusterName=gpudiag
SlurmctldHost=$node
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=${GPUDIAG_SLURMCTLD_PORT:-6817}
SlurmdPort=${GPUDIAG_SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
InactiveLimit=0
KillWait=5
MinJobAge=30
NodeName=$node CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$conf

# munged: reuse a running one, else start ours with the package's key.
socket=/run/munge/munge.socket.2
if ! munge -n >/dev/null 2>&1; then
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  key=/etc/munge/munge.key
  [[ -s $key ]] || { dd if=/dev/urandom of=$key bs=1 count=1024 status=none; chmod 400 $key; }
  munged --force --socket=$socket --key-file=$key --log-file="$dir/log/munged.log" \
         --pid-file="$dir/munged.pid" --seed-file="$dir/munge/seed" 2>>"$dir/log/munged.err"
fi

running() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
running "$dir/slurmctld.pid" || slurmctld -f "$conf" 2>>"$dir/log/slurmctld.err"
running "$dir/slurmd.pid" || slurmd -f "$conf" 2>>"$dir/log/slurmd.err"

# Wait until the node takes jobs.
for _ in $(seq 1 60); do
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)
  case "$state" in idle|mixed|allocated) echo "export SLURM_CONF=$conf"; exit 0 ;; esac
  [[ "$state" == *drain* || "$state" == down* ]] && scontrol update nodename="$node" state=resume 2>/dev/null || true
  sleep 0.5
done
echo "slurm-up: node $node did not become idle (state: ${state:-none}); see $dir/log/" >&2
exit 1
