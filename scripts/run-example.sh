#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs the example job end to end through
# `ftl run`: packages, build, then the job with 4 ranks. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
mkdir -p build
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/release.build.log 2>&1 ||
  { cat build/release.build.log >&2; exit 1; }
export PATH="$PWD/build/release/bin:$PATH"
exec ftl run examples/allreduce/job.yaml "$@"
