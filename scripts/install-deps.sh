#!/usr/bin/env bash
# Installs the Debian packages gpudiag needs that are missing on this machine.
#
#   scripts/install-deps.sh          build dependencies only
#   scripts/install-deps.sh --test   also what the test suite drives for real
#                                    (SLURM + munge, PyTorch, clang for fuzzing)
#
# As root it runs apt-get itself; otherwise it prints the exact command to run.
# CUDA and NCCL are not Debian packages here: they are expected under
# /usr/local/cuda (or CUDA_HOME / NCCL_HOME) and are optional for the build.
set -euo pipefail

build_pkgs=(cmake g++ make ninja-build pkg-config libcli11-dev libspdlog-dev nlohmann-json3-dev
            libssl-dev libgtest-dev libopenmpi-dev openmpi-bin iproute2 procps)
test_pkgs=(slurm-wlm slurm-wlm-basic-plugins munge libpmix-dev python3 python3-torch
           python3-numpy clang libclang-rt-14-dev prometheus-node-exporter gdb elfutils)

want=("${build_pkgs[@]}")
[[ "${1:-}" == "--test" ]] && want+=("${test_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

cmd=(apt-get install -y --no-install-recommends "${missing[@]}")
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root:  sudo apt-get update && sudo ${cmd[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
"${cmd[@]}"
