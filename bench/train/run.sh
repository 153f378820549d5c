#!/usr/bin/env bash
# bench/train/run.sh [BUILD_DIR] [bench-train options]: bench-train under `ftl run -n 1`, so that
# ftl_step_done talks to a real launcher. Prints the throughput and the overhead tables. Smallest
# size (the test suite's smoke test, tests/bench): --rounds 2 --steps-per-round 2 --pass-reps 3.
set -euo pipefail
build=${1:-build/release}
shift || true
work=$(mktemp -d "${TMPDIR:-/tmp}/ftl-train-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export FTL_LOG_LEVEL=${FTL_LOG_LEVEL:-warn} FTL_BACKEND=mpi
"$build/bin/ftl" run -n 1 --run-dir "$work/run" -- "$build/bin/bench-train" "$@" 2>&1 | sed 's/^\[rank 0\] //'
