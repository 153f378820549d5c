# tests/python/torch_finish.sh: examples/torch-lora (a PyTorch program on ftl's Python binding, no
# gate) hit at the end of its run and run again: rank 1 SIGKILLed right after the commit of the
# final step (the restart restores it, has nothing to train, ck.wait() returns with nothing pending
# and it exports), and the launcher SIGKILLed once the training is over (the rerun of the same
# command does the same; with finish.json not yet written, the program itself says it is done).
# Each ends with exit 0 and the unbroken run's adapter; a rerun of a finished run says so, starts
# nothing, and takes under 5 s.
. "$(dirname "$0")/torch_lib.sh" || exit 1
. "$(dirname "$0")/../eval/finish_lib.sh" || exit 1
ARGS=(--steps 30 --ckpt-every 10)

# job FILE NAME [ENV]: torch-lora's job spec with these arguments and ENV in the ranks' environment.
job() {
  printf 'name: %s\nranks: 2\nprogram: %s\nargs: %s\nenv: {%sOMP_NUM_THREADS: "1", FTL_BACKEND: mpi}\n' "$2" \
    "$TL_TRAIN" "$(yaml_list "${ARGS[@]}")" "${3:+$3, }" >"$1"
}
ROWS=()
row() {
  local same=yes
  same_adapter_quiet ref/export "$2/export" || same=no
  ROWS+=("$(printf '%-32s %4s %10s' "$1" "$3" "$same")")
  [ "$3" = 0 ] || fail "$1: the run ended with exit code $3, not 0"
  [ "$same" = yes ] || fail "$1: the adapter differs from the unbroken run's"
}
same_adapter_quiet() { cmp -s "$1/adapter_model.safetensors" "$2/adapter_model.safetensors" && cmp -s "$1/adapter_config.json" "$2/adapter_config.json"; }

job ref.yaml ref
run_ftl ref.out run --run-dir ref ref.yaml
expect_rc 0 ref.out
check_peft ref/export

job r1.yaml r1 'FTL_CRASH_AT: after_commit, FTL_CRASH_RANK: "1", FTL_CRASH_STEP: "30"'
run_ftl r1.out run --run-dir r1 r1.yaml
expect_contains r1.out "crash point after_commit reached"
[ -d r1/attempt-0001 ] || fail "rank-after-final-commit: no restart"
expect_contains r1/attempt-0001/rank-00000.out "resumed from step 30"
sweep_trained_again r1 && fail "rank-after-final-commit: the restart trained again"
row rank-after-final-commit r1 "$RC"

job l.yaml l
FTL_CRASH_AT=run.after_training run_ftl l-killed.out run --run-dir l l.yaml
expect_contains l-killed.out "crash point run.after_training reached"
[ "$RC" = 137 ] || fail "the launcher killed after the training exited $RC, not 137"
ROWS+=("$(printf '%-32s %4s %10s' launcher-run.after_training "$RC" -)")
run_ftl l-again.out run --run-dir l l.yaml
expect_contains l/attempt-0001/rank-00000.out "resumed from step 30"
sweep_trained_again l && fail "launcher-then-rerun: the rerun trained again"
row launcher-then-rerun l "$RC"

t0=$(date +%s%N)
run_ftl l-done.out run --run-dir l l.yaml
ms=$((($(date +%s%N) - t0) / 1000000))
expect_contains l-done.out "already finished: job 'l' trained to its end"
[ ! -d l/attempt-0002 ] || fail "the rerun of a finished run started an attempt"
[ "$ms" -lt 5000 ] || fail "the rerun of a finished run took $ms ms"
row rerun-finished l "$RC"

printf '%-32s %4s %10s\n' case exit identical
printf '%s\n' "${ROWS[@]}"
echo "rerun of the finished run: $ms ms"
expect_no_leftovers
echo ok
