#!/usr/bin/env bash
# tests/gpu/build_info.sh FTL HAVE_CUDA HAVE_NCCL: `ftl version` says what this build compiled in,
# the same as configure decided (docs/gpu.md): a GPU machine's build that silently left out CUDA or
# NCCL is visible in one command. Runs on any machine (the run-time part only reports).
set -uo pipefail
ftl=$1
cuda=$2
nccl=$3
out=$("$ftl" version) || { echo "FAIL: ftl version exited $?"; exit 1; }
echo "$out"
check() { grep -qE "$1" <<<"$out" || { echo "FAIL: ftl version has no line matching '$1'"; exit 1; }; }
check "^ftl [0-9]+\.[0-9]+\.[0-9]+$"
check "^  CUDA:  $cuda \("
check "^  NCCL:  $nccl \("
check "^  HDF5:  "
check "^  MPI:   .+"
check "^  this machine: (CUDA driver [0-9]+\.[0-9]+|no CUDA driver)"
if [ "$cuda" = ON ]; then check "^  CUDA:  ON \([0-9]+\.[0-9]+, /"; fi
# The runtime the library loads at run time (core/dl.h), found or named.
if [ "$cuda" = ON ]; then check "^  this machine: .*, (CUDA runtime [0-9]+\.[0-9]+|no CUDA runtime \(libcudart\.so\.[0-9]+\))"; fi
if [ "$nccl" = ON ]; then check "^  NCCL:  ON \([0-9]+\.[0-9]+\.[0-9]+, /.*libnccl\.so"; fi
if [ "$nccl" = OFF ] && [ "$cuda" = ON ]; then check "^  NCCL:  OFF \(.*(not found|FTL_WITH_NCCL=OFF)"; fi
echo ok
