#!/usr/bin/env bash
# bench/recovery/run.sh: installs Debian's python3-torch (for torchrun) if missing, builds ftl, and
# runs the recovery benchmark: ftl against torchrun, side by side. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup-deps.sh
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi
mkdir -p build
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/release.build.log 2>&1 ||
  { cat build/release.build.log >&2; exit 1; }
export PATH="$PWD/build/release/bin:$PATH"
exec /usr/bin/python3 bench/recovery/bench_recovery.py "$@"
