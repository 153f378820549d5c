#!/usr/bin/env bash
# Configures and builds ftl into a build folder: scripts/build.sh DIR [CMAKE ARGS...].
# Warnings are errors. Used by run-example.sh and test.sh; safe to run again (incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
# The configure log sits beside the build folder (DIR.configure.log): its parent must exist first.
mkdir -p "$(dirname "$dir")"
cmake -S . -B "$dir" -DFTL_WERROR=ON "$@" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log" >&2; exit 1; }
cmake --build "$dir" -j"$(nproc)"
