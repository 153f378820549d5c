#!/usr/bin/env bash
# bench/recovery/run.sh [RUNS | --smoke]: installs Debian's python3-torch (for torchrun) if missing,
# builds ftl, and runs the recovery benchmark: ftl against torchrun, side by side (bench_recovery.py).
# --smoke: one kill per side, as the test suite's smoke test runs it (tests/bench). With FTL_BIN_DIR
# set (as ctest sets it) it uses that build's binaries and installs and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${FTL_BIN_DIR:-}" ]; then
  export PATH="$FTL_BIN_DIR:$PATH"
else
  bash scripts/setup-deps.sh
  bash scripts/setup-python.sh # the venv of the Trainer rows (examples/hf-trainer)
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
  fi
  mkdir -p build
  bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/release.build.log 2>&1 ||
    { cat build/release.build.log >&2; exit 1; }
  export PATH="$PWD/build/release/bin:$PATH"
fi
exec /usr/bin/python3 bench/recovery/bench_recovery.py "$@"
