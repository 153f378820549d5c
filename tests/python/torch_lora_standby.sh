# tests/python/torch_lora_standby.sh: examples/torch-lora with a standby gang (warm restarts): the
# standby's ranks import torch and park in ftl.init(); a random rank of the running attempt is
# SIGKILLed once the standby is parked and a checkpoint committed; the standby takes over, restores
# through the Python binding, and the adapter is byte-identical to an unbroken run's.
. "$(dirname "$0")/torch_lib.sh" || exit 1
ARGS=(--steps 200 --ckpt-every 10)
run_ftl ref.out run -n 2 --no-standby --run-dir ref -- "$TL_TRAIN" "${ARGS[@]}"
expect_rc 0 ref.out
[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
KILL_RANK=$((RANDOM % 2))
ftl run -n 2 --max-restarts 2 --run-dir victim -- "$TL_TRAIN" "${ARGS[@]}" --step-ms 40 >out 2>&1 &
FTL_PID=$!
wait_for_event victim standby_parked out
for _ in $(seq 600); do
  has_commit victim && break
  sleep 0.05
done
pid=$(rank_pid victim "$TL_TRAIN" "$KILL_RANK")
[ -n "$pid" ] || { cat out >&2; fail "rank $KILL_RANK's process not found"; }
kill -KILL "$pid"
echo "killed rank $KILL_RANK (pid $pid) with a standby parked"
wait $FTL_PID
RC=$?
expect_rc 0 out
grep -q '"event":"standby_activated"' victim/events.jsonl || fail "the standby did not take over"
grep '"event":"attempt_start"' victim/events.jsonl | grep '"attempt":1[,}]' | grep -q '"launcher":"standby"' ||
  fail "attempt 1 did not start warm"
expect_contains victim/attempt-0001/rank-00000.out "resumed from step"
same_adapter ref/export victim/export
grep -o "restart cost R = [0-9.]* s" out | head -1
expect_no_leftovers
echo ok
