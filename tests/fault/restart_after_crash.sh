# A rank that crashes in the first attempt only: ftl records the failure in the ledger, backs
# off, relaunches, the ranks resume from their last save, and the job finishes (exit 0).
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out run -n 4 --run-dir run -- fault_probe --steps 30 --step-ms 30 --fail-rank 2 --fail-step 12 --fail-attempts 1 --marker "$MARKER"
expect_rc 0 out
expect_contains out "rank 2 on host $(hostname -s) exited with code 3"
expect_contains out "restart 1 of 3"
expect_contains out "probe: attempt 1 starts at step 10 of 30"
expect_contains out "probe: finished 30 steps"
expect_contains out "goodput"
[ "$(ledger_count run/failures.jsonl)" -eq 1 ] || fail "expected one ledger record"
grep -q '"cause":"exit_code"' run/failures.jsonl || fail "ledger cause is not exit_code"
grep -q '"rank":2' run/failures.jsonl || fail "ledger does not name rank 2"
grep -q '"event":"run_goodput"' run/events.jsonl || fail "no goodput event"
lag=$(grep '"event":"failure"' run/events.jsonl | head -1 | sed 's/.*"detect_lag_ms":\([0-9.]*\).*/\1/')
print_latency "crash (exit code)" "$lag"
awk -v l="$lag" 'BEGIN { exit !(l < 1000) }' || fail "crash detected after $lag ms (goal: under 1 s)"
expect_no_leftovers
echo "ok"
