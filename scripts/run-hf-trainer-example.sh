#!/usr/bin/env bash
# Runs examples/hf-trainer (transformers' Trainer + peft under ftl.hf.train) through the whole
# pipeline (docs/pipeline.md, "A PEFT adapter through the gate"): first the C example
# (scripts/run-example.sh: packages, build, the venv, the data, its base model and its job), whose
# base is then exported as a Hugging Face folder (runs/hf-lora-data/base), then
# `ftl run examples/hf-trainer/job.yaml`: snapshot -> 2 ranks train with Trainer -> the gate
# (examples/hf-lora/eval.py) -> publish and promote hf-trainer to `candidate` in runs/registry.
# Its exit code is `ftl run`'s. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/run-example.sh
export PATH="$PWD/build/release/bin:$PATH"
# The base the C job's snapshot names, as a Hugging Face folder (deterministic bytes).
ftl export runs/finetune --base -o runs/hf-lora-data
rm -rf runs/hf-trainer # a fresh run folder: one that holds checkpoints resumes from its newest
ftl run examples/hf-trainer/job.yaml "$@"
