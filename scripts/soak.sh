#!/usr/bin/env bash
# The fault soak, kept out of the test suite for its length: for each of SEEDS seeds (default 20),
# the example fine-tune runs under `ftl run`, one random rank is SIGKILLed at a random step after
# the first committed checkpoint, ftl restarts the gang, and the final adapter must be
# byte-identical to the failure-free run's (tests/finetune/kill_resume.sh auto, RANDOM seeded).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-20}
bash scripts/setup-deps.sh
mkdir -p build
bash scripts/build.sh build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/release.build.log 2>&1 ||
  { cat build/release.build.log >&2; exit 1; }
export FTL_BIN_DIR=$PWD/build/release/bin FTL_SOURCE_DIR=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
passed=0 failed=0
for seed in $(seq 1 "$seeds"); do
  if out=$(SOAK_SEED=$seed bash tests/finetune/kill_resume.sh auto 2>&1); then
    passed=$((passed + 1))
    echo "seed $seed: $(grep -m1 -E '^killed rank' <<<"$out"); $(grep -m1 -o 'resumed from the checkpoint of step [0-9]*' <<<"$out"); adapter identical"
  else
    failed=$((failed + 1))
    echo "seed $seed: FAILED"
    echo "$out" | tail -20
  fi
done
echo "soak: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
