#!/usr/bin/env bash
# bench/ckpt/run.sh [--smoke] [BUILD_DIR (build/release)] [WORK_DIR]: the checkpoint bench with 2 ranks,
# 64 MiB and 512 MiB of state per rank. WORK_DIR must be on the disk being measured (default
# /var/tmp, not tmpfs). --smoke: the smallest size (1 MiB, 3 repetitions, the page cache left
# alone), as the test suite's smoke test runs it (tests/bench); its numbers mean nothing.
set -euo pipefail
smoke=()
if [ "${1:-}" = --smoke ]; then
  smoke=(--smoke)
  shift
fi
build=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build/release}
work=${2:-/var/tmp/ftl-ckpt-bench}
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
# The L2 row needs each rank on a host of its own: each rank runs in a UTS namespace with its own host
# name (root only; otherwise the row says n/a), and MPI over TCP only, so a partner's copy crosses a
# real socket (the loopback) rather than shared memory.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp
export FTL_LOG_LEVEL=${FTL_LOG_LEVEL:-warn}
if unshare --uts true 2>/dev/null; then
  mpirun --oversubscribe -n 1 unshare --uts sh -c 'hostname "$0" && exec "$@"' ftl-bench-a \
    "$build/bin/ckpt_bench" "${smoke[@]}" "$work" : \
    -n 1 unshare --uts sh -c 'hostname "$0" && exec "$@"' ftl-bench-b "$build/bin/ckpt_bench" "${smoke[@]}" "$work"
else
  mpirun --oversubscribe -n 2 "$build/bin/ckpt_bench" "${smoke[@]}" "$work"
fi
