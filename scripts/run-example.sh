#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs the example job end to end through
# `ftl run`: packages, build, the data and the base model, then the main job (docs/pipeline.md):
# snapshot of the inputs -> the fine-tune on 4 ranks -> the evaluation gate -> publish and promote
# to `candidate` in runs/registry. It ends with the verdict and the published version; its exit
# code is `ftl run`'s (0 published, 1 the gate failed and nothing was published). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/setup-python.sh # .venv: the pinned Hugging Face stack (tests/python/hf_*)
mkdir -p build
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/release.build.log 2>&1 ||
  { cat build/release.build.log >&2; exit 1; }
export PATH="$PWD/build/release/bin:$PATH"
# The data is made once (deterministic). The base model is one of the job's inputs, so it must exist
# (and is hashed) when the job is submitted: it is pre-trained once, by the same program on the same
# 4 ranks with no fine-tune steps, and reused after.
# A base model from an earlier release (format version 1, the GPT-2 shaped model) is refused by
# this one: then the data (whose pre-training corpus changed with it) and the base are made again.
if [ -f runs/finetune-data/base.h5 ] && ! ftl-finetune-eval --base runs/finetune-data/base.h5 \
    --dump-logits runs/finetune-data/probe.logits --text a >/dev/null 2>&1; then
  echo "runs/finetune-data/base.h5 is from an earlier release: making the data and the base model again"
  rm -rf runs/finetune-data
fi
rm -f runs/finetune-data/probe.logits
[ -f runs/finetune-data/heldout.txt ] || ftl-finetune-data --out runs/finetune-data
if [ ! -f runs/finetune-data/base.h5 ]; then
  rm -rf runs/finetune-base
  FTL_BACKEND=mpi OMP_NUM_THREADS=1 FTL_LOG_LEVEL=warn ftl run -n 4 --run-dir runs/finetune-base -- \
    ftl-finetune --data runs/finetune-data --base runs/finetune-data/base.h5 --pretrain-steps 300 --steps 0 \
    --seed 1 --log-every 100
fi
# Each run starts a fresh run folder: a run directory that already holds checkpoints resumes from
# its newest one. The registry keeps every published version.
rm -rf runs/finetune
ftl run examples/finetune/job.yaml "$@"
