# tests/eval/finish_sweep.sh: the main job (the example fine-tune through the gate and the publish)
# hit at each boundary of its end, and run again as a requeue would (docs/fault-tolerance.md,
# "The end of a run"). Every case must end with exit 0, the adapter byte-identical to an unbroken
# run's, and one version published; nothing is trained again once final/ is committed, and a rerun
# of a published run publishes nothing new and says which version it published.
#   rank-after-final-commit  rank 1 SIGKILLed right after the commit of the final step
#   rank-during-export       rank 0 SIGKILLed writing final/, before its commit marker
#   launcher-*               the launcher SIGKILLed after the training, during the gate's verdict,
#                            during the publish and right after it, each followed by `ftl run` again
#                            (one run directory, as a batch job requeued four times)
#   rerun-published          `ftl run` once more: "already finished", exit 0, no rank started
. "$(dirname "$0")/lib.sh" || exit 1
. "$(dirname "$0")/finish_lib.sh" || exit 1
GATE="$EXAMPLE_EVAL
metric: loss_gain
direction: higher
threshold: 0.01"
FILES=(adapter.safetensors adapter.json COMMIT)

# job NAME [ENV]: NAME.yaml, the job with a registry of its own (reg-NAME, channel candidate); ENV:
# more of the ranks' environment as YAML flow entries (a rank's crash point is set there: the spec's
# env is what reaches the program).
job() {
  write_job "$1.yaml" "$1" "$GATE" "path: reg-$1
channel: candidate"
  [ -z "${2:-}" ] || sed -i "s/^env: {/env: {$2, /" "$1.yaml"
}

job ref
run_ftl ref.out run --run-dir ref ref.yaml
expect_rc 0 ref.out
expect_contains ref.out "published ref version"

# A rank killed right after the final step's commit: its gang ends; whether rank 0 had committed
# final/ by then or not, the step is not trained again (a restart restores it and only exports).
job r1 "FTL_CRASH_AT: after_commit, FTL_CRASH_RANK: \"1\", FTL_CRASH_STEP: \"$FT_STEPS\""
run_ftl r1.out run --run-dir r1 r1.yaml
expect_contains r1.out "crash point after_commit reached"
if grep -q '"event":"rank_started".*"attempt":1' r1/events.jsonl 2>/dev/null || [ -d r1/attempt-0001 ]; then
  expect_contains r1/attempt-0001/rank-00000.out "resumed from the checkpoint of step $FT_STEPS"
  grep -q "^step [0-9]" r1/attempt-0001/rank-00000.out && fail "the restarted attempt trained again after restoring step $FT_STEPS"
fi
sweep_row rank-after-final-commit r1 "$RC"

# Rank 0 killed writing final/ (files written, COMMIT not yet): the restart exports again.
job r2 "FTL_CRASH_AT: adapter.commit"
run_ftl r2.out run --run-dir r2 r2.yaml
expect_contains r2.out "crash point adapter.commit reached"
[ -d r2/attempt-0001 ] || fail "rank-during-export: no restart after rank 0 died writing final/"
grep -q "^step [0-9]" r2/attempt-0001/rank-00000.out && fail "rank-during-export: the restart trained again"
sweep_row rank-during-export r2 "$RC"

# The launcher killed at each boundary after the training, then run again (a requeue), in one run
# directory: the training happens once.
job l
sweep_launcher_requeues l
# Once more: already finished, nothing started, under 5 s.
sweep_rerun_published l

sweep_table
expect_no_leftovers
echo ok
