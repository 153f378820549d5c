#!/usr/bin/env bash
# Installs the Debian packages ftl needs to build and test. Safe to run twice:
# apt-get skips what is already installed, and the update runs only when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang
  openmpi-bin libopenmpi-dev
  libhdf5-dev hdf5-tools
  libarchive-dev libssl-dev libzstd-dev zstd
  libyaml-dev libjansson-dev libxxhash-dev
  python3-h5py python3-numpy python3-torch
  python3-venv python3-yaml python3-requests python3-psutil # under the pins of scripts/setup-python.sh
  procps iproute2 util-linux
  slurmctld slurmd slurm-client munge
  chromium          # tests/launcher/ops_report.sh: opens `ftl report`'s page headless, screenshots it
  groff-base man-db # tests/launcher/man_pages.sh: renders docs/man/ with warnings on
  prometheus        # promtool: tests check the metrics textfile with `promtool check metrics`
  lintian dpkg-dev fakeroot # the Debian packages are built, dpkg-shlibdeps'd and lintian-checked in a test
  universal-ctags   # tests/unit/house_limits.sh: the functions' lengths (scripts/house-metrics.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
echo "ftl setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
