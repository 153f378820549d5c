# tests/python/torch_lora_kill.sh: examples/torch-lora with a random rank SIGKILLed after the first
# committed checkpoint: ftl restarts the gang, the ranks restore through the Python binding, and
# the adapter is byte-identical to an unbroken run's (modelled on tests/fault/ft_*.sh).
. "$(dirname "$0")/torch_lib.sh" || exit 1
run_ftl ref.out run -n 2 --run-dir ref -- "$TL_TRAIN" "${TL_ARGS[@]}"
expect_rc 0 ref.out
check_peft ref/export

[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
KILL_RANK=$((RANDOM % 2))
ftl run -n 2 --max-restarts 2 --run-dir victim -- "$TL_TRAIN" "${TL_ARGS[@]}" --step-ms 40 >out 2>&1 &
FTL_PID=$!
for _ in $(seq 600); do
  has_commit victim && break
  sleep 0.05
done
has_commit victim || { cat out >&2; fail "no committed checkpoint after 30 s"; }
pid=$(rank_pid victim "$TL_TRAIN" "$KILL_RANK") # the running attempt's, not the standby's
[ -n "$pid" ] || { cat out >&2; fail "rank $KILL_RANK's process not found"; }
kill -KILL "$pid"
echo "killed rank $KILL_RANK (pid $pid); committed then:" $(ls -d victim/checkpoints/step-*/manifest.json 2>/dev/null | cut -d/ -f3)
wait $FTL_PID
RC=$?
expect_rc 0 out
[ -d victim/attempt-0001 ] || fail "no second attempt"
expect_contains victim/attempt-0001/rank-00000.out "resumed from step"
grep -o "resumed from step [0-9]*" victim/attempt-0001/rank-00000.out
same_adapter ref/export victim/export
expect_no_leftovers
echo ok
