# tests/eval/finish_lib.sh: what the end-of-job sweeps share (tests/eval/finish_sweep.sh for the C
# fine-tune, tests/python/hf_finish_sweep.sh for examples/hf-lora; tests/python/torch_finish.sh takes
# sweep_trained_again): each case's check and table row,
# the launcher killed at each boundary after the training and requeued, and the timed rerun of the
# published run. Sourced after tests/launcher/lib.sh (through the folder's own lib). The caller
# sets FILES (final/'s files to compare with ref/final) and runs the unbroken reference into
# ref/; every job publishes to reg-NAME on channel candidate.
SWEEP_ROWS=()

# sweep_trained_again RUNDIR: whether an attempt after the first trained a step (the Python examples
# print "step N loss" from their first step on).
sweep_trained_again() { cat "$1"/attempt-000[1-9]/rank-00000.out 2>/dev/null | grep -q '^step [0-9]* loss'; }

# sweep_versions NAME: how many versions the registry of job NAME holds.
sweep_versions() { ls "reg-$1/$1/versions" 2>/dev/null | grep -c '^[0-9a-f]\{64\}$'; }

# sweep_row CASE NAME RC: the case ended with exit 0, final/ byte-identical to ref/final, one
# version published and candidate on it; its line goes in the table.
sweep_row() {
  local case=$1 name=$2 rc=$3 same=yes n f
  for f in "${FILES[@]}"; do cmp -s "ref/final/$f" "$name/final/$f" || same=no; done
  n=$(sweep_versions "$name")
  SWEEP_ROWS+=("$(printf '%-32s %4s %10s %9s' "$case" "$rc" "$same" "$n")")
  [ "$rc" = 0 ] || fail "$case: the run ended with exit code $rc, not 0"
  [ "$same" = yes ] || fail "$case: final/ differs from the unbroken run's"
  [ "$n" = 1 ] || fail "$case: $n versions published, not 1"
  [ -f "reg-$name/$name/channels/candidate.json" ] || fail "$case: candidate points at nothing"
}

# sweep_launcher_requeues NAME: the job NAME.yaml (run directory NAME) with its launcher SIGKILLed
# after the training, during the gate's verdict, during the publish and right after it, each
# followed by `ftl run` again in the same run directory, as a batch job requeued four times; then
# once more to the end. The training happens once, in the first attempt.
sweep_launcher_requeues() {
  local name=$1 point id
  for point in run.after_training verdict_write publish.before_rename run.after_publish; do
    FTL_CRASH_AT=$point run_ftl "$name-$point.out" run --run-dir "$name" "$name.yaml"
    expect_contains "$name-$point.out" "crash point $point reached"
    [ "$RC" = 137 ] || { cat "$name-$point.out" >&2; fail "the launcher killed at $point exited $RC, not 137 (SIGKILL)"; }
    SWEEP_ROWS+=("$(printf '%-32s %4s %10s %9s' "launcher-$point" "$RC" "-" "$(sweep_versions "$name")")")
  done
  [ "$(ls -d "$name"/attempt-* | wc -l)" = 1 ] || fail "the requeues started ranks again: $(ls -d "$name"/attempt-*)"
  run_ftl "$name-last.out" run --run-dir "$name" "$name.yaml"
  expect_contains "$name-last.out" "finished its training before (final/ committed)"
  sweep_row launcher-then-requeue "$name" "$RC"
  id=$(ls "reg-$name/$name/versions" | grep '^[0-9a-f]\{64\}$')
  expect_contains "$name-last.out" "published $name version $id"
}

# sweep_rerun_published NAME: `ftl run` once more on the published run: "already finished" with its
# version, exit 0, no rank started, under 5 s (SWEEP_RERUN_MS).
sweep_rerun_published() {
  local name=$1 t0 id
  id=$(ls "reg-$name/$name/versions" | grep '^[0-9a-f]\{64\}$')
  t0=$(date +%s%N)
  run_ftl "$name-again.out" run --run-dir "$name" "$name.yaml"
  SWEEP_RERUN_MS=$((($(date +%s%N) - t0) / 1000000))
  expect_contains "$name-again.out" "already finished: published $name version $id"
  [ "$(ls -d "$name"/attempt-* | wc -l)" = 1 ] || fail "the rerun of a published run started ranks"
  [ "$SWEEP_RERUN_MS" -lt 5000 ] || fail "the rerun of a published run took $SWEEP_RERUN_MS ms"
  sweep_row rerun-published "$name" "$RC"
}

# sweep_table: the cases, as the closing note quotes them.
sweep_table() {
  printf '%-32s %4s %10s %9s\n' case exit identical versions
  printf '%s\n' "${SWEEP_ROWS[@]}"
  echo "rerun of the published run: $SWEEP_RERUN_MS ms"
}
