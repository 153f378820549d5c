# tests/python/hf_trainer_standby.sh: examples/hf-trainer with a standby gang (warm restarts): the
# standby's ranks import torch, transformers and peft and park in ftl.hf.trainer_init() (ftl.init(),
# before TrainingArguments forms the process group); a random rank of the running attempt is
# SIGKILLed once the standby is parked and a checkpoint committed; the standby takes over, forms
# its process group, resumes through Trainer's resume path, and RUNDIR/final is byte-identical to
# the reference's (hf_trainer_lib.sh).
. "$(dirname "$0")/hf_trainer_lib.sh" || exit 1
[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
KILL_RANK=$((RANDOM % 2))
ftl run -n 2 --standby --max-restarts 2 --run-dir victim -- "$HF_PY" "$HT_TRAIN" "${HT_ARGS[@]}" --step-ms 60 >out 2>&1 &
FTL_PID=$!
wait_for_event victim standby_parked out
wait_for_commit victim out
pid=$(rank_pid victim "$HT_TRAIN" "$KILL_RANK")
[ -n "$pid" ] || { cat out >&2; fail "rank $KILL_RANK's process not found"; }
kill -KILL "$pid"
echo "killed rank $KILL_RANK (pid $pid) with a standby parked"
wait_rc $FTL_PID
expect_rc 0 out
grep -q '"event":"standby_activated"' victim/events.jsonl || fail "the standby did not take over"
grep '"event":"attempt_start"' victim/events.jsonl | grep '"attempt":1[,}]' | grep -q '"launcher":"standby"' ||
  fail "attempt 1 did not start warm"
expect_contains victim/attempt-0001/rank-00000.out "resumed from ftl checkpoint"
grep -o "resumed from ftl checkpoint [0-9]*" victim/attempt-0001/rank-00000.out
grep -o "restart cost R = [0-9.]* s" out | head -1
same_files refrun/ref/final victim/final "${HT_FILES[@]}"
expect_no_leftovers
echo ok
