# Failures are restarted until the whole-job budget is spent; while they make no progress the
# back-off doubles between attempts (progress would start it over).
. "$(dirname "$0")/lib.sh" || exit 1
probe_job job.yaml budget 2 "--steps 50 --step-ms 150 --fail-rank 0 --fail-step 3 --save-every 0" \
  "restart: {max_restarts: 2, backoff_s: 0.2, max_backoff_s: 5, crash_loop: 10}"
run_ftl out run job.yaml
expect_rc 1 out
expect_contains out "the restart budget (2) is spent"
[ "$(ledger_count runs/budget/failures.jsonl)" -eq 3 ] || fail "expected three ledger records"
grep '"event":"restart"' runs/budget/events.jsonl | grep -q '"backoff_ms":400' || fail "the back-off did not double"
expect_no_leftovers
echo "ok"
