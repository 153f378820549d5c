# Resume after a crash: a rank is SIGKILLed at a step chosen at random after the first committed
# checkpoint; the job resumes from the newest committed checkpoint and the final adapter is
# byte-identical to an uninterrupted run's.
#   kill_resume.sh hand   the relaunch is a second `ftl run` on the same run directory (the
#                         launcher's own restart, where it has one, is turned off)
#   kill_resume.sh auto   the launcher restarts the gang by itself (skipped without --max-restarts)
MODE=${1:-hand}
. "$(dirname "$0")/lib.sh" || exit 1
HAVE_RESTART=0
ftl help run 2>&1 | grep -q -- --max-restarts && HAVE_RESTART=1
[ "$MODE" = auto ] && [ $HAVE_RESTART = 0 ] && { echo "skipped: this ftl does not restart by itself"; exit 77; }
ftl-finetune --help 2>&1 | grep -q -- --ckpt-every || fail "ftl-finetune has no --ckpt-every"
EVERY=5
# The reference: uninterrupted, same settings.
run_ftl ref.out run -n 4 --run-dir ref -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every $EVERY
expect_rc 0 ref.out
grep -q "this build has no checkpoint module" ref.out && { echo "skipped: built without ftl_ckpt"; exit 77; }

# The victim: the same job, slowed down so the kill lands mid-run.
VICTIM_ARGS=("${FT_ARGS[@]}" --ckpt-every $EVERY --throttle-ms 40)
NO_RESTART=()
[ "$MODE" = hand ] && [ $HAVE_RESTART = 1 ] && NO_RESTART=(--max-restarts 0)
# A seed makes the choice repeatable (scripts/soak.sh sets one per run).
[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
KILL_STEP=$((EVERY + 2 + RANDOM % (FT_STEPS - EVERY - 6)))
KILL_RANK=$((RANDOM % 4))
ftl run -n 4 "${NO_RESTART[@]}" --run-dir victim -- ftl-finetune "${VICTIM_ARGS[@]}" >victim.out 2>&1 &
FTL_PID=$!
log=victim/attempt-0000/rank-00000.out
# The victim rank's process, found first so that the kill follows the step at once.
pid=""
for _ in $(seq 1500); do
  pid=$(rank_pid victim "$MARKER" "$KILL_RANK" ftl-finetune) # the running attempt's, not a standby's
  [ -n "$pid" ] && break
  sleep 0.02
done
[ -n "$pid" ] || { cat victim.out >&2; fail "rank $KILL_RANK's process not found"; }
# The kill step, and a committed checkpoint (written in the background: on a loaded machine its
# fsync can lag the training by many steps), both before the kill.
for _ in $(seq 3000); do
  grep -q "^step $KILL_STEP/" "$log" 2>/dev/null && has_commit victim && break
  sleep 0.01
done
grep -q "^step $KILL_STEP/" "$log" || { cat victim.out >&2; fail "the job never reached step $KILL_STEP"; }
has_commit victim || fail "no committed checkpoint before step $KILL_STEP"
kill -KILL "$pid"
echo "killed rank $KILL_RANK (pid $pid) at step $KILL_STEP; committed then:" $(ls -d victim/checkpoints/step-*/manifest.json 2>/dev/null | cut -d/ -f3)
wait $FTL_PID
RC=$?
if [ "$MODE" = auto ]; then
  # One `ftl run`: the launcher saw the rank die, ended the gang and started attempt 1.
  expect_rc 0 victim.out
  [ -d victim/attempt-0001 ] || fail "no second attempt"
  expect_contains victim/attempt-0001/rank-00000.out "resumed from the checkpoint of step"
  grep -o "resumed from the checkpoint of step [0-9]*" victim/attempt-0001/rank-00000.out | head -1
  same_adapter ref/final victim/final
  expect_no_leftovers
  echo "ok"
  exit 0
fi
expect_rc 1 victim.out
expect_contains victim.out "signal"
[ -e victim/final/adapter.safetensors ] && fail "the killed run finished anyway"

# Relaunch by hand on the same run directory (same job spec).
run_ftl again.out run -n 4 "${NO_RESTART[@]}" --run-dir victim -- ftl-finetune "${VICTIM_ARGS[@]}"
expect_rc 0 again.out
expect_contains again.out "resumed from the checkpoint of step"
grep -o "resumed from the checkpoint of step [0-9]*" again.out | head -1
same_adapter ref/final victim/final
expect_no_leftovers
echo "ok"
