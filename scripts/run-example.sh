#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs the example job end to end through
# `ftl run`: packages, build, then the example fine-tune with 4 ranks, ending with the held-out
# metric of the base model against the adapter's. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
mkdir -p build
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/release.build.log 2>&1 ||
  { cat build/release.build.log >&2; exit 1; }
export PATH="$PWD/build/release/bin:$PATH"
# The example fine-tune (docs/finetune.md): the data is made once; the job pre-trains the base model
# when runs/finetune-data/base.h5 is missing and reuses it after; each run starts a fresh run folder.
[ -f runs/finetune-data/heldout.txt ] || ftl-finetune-data --out runs/finetune-data
rm -rf runs/finetune
ftl run examples/finetune/job.yaml "$@" && ftl-finetune-eval --base runs/finetune-data/base.h5 \
  --adapter runs/finetune/final --data runs/finetune-data/heldout.txt --out runs/finetune/eval.json
