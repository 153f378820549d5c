# A rank that fails at the same step in every attempt: after restart.crash_loop attempts ftl stops
# with a crash-loop report instead of spending the whole restart budget.
. "$(dirname "$0")/lib.sh" || exit 1
probe_job job.yaml crashloop 2 "--steps 20 --step-ms 10 --fail-rank 1 --fail-step 5 --save-every 0" \
  "restart: {max_restarts: 10, backoff_s: 0.1, crash_loop: 3}"
run_ftl out run job.yaml
expect_rc 1 out
expect_contains out "crash loop: 3 attempts in a row failed at step"
[ "$(ledger_count runs/crashloop/failures.jsonl)" -eq 3 ] || fail "expected three ledger records"
[ -d runs/crashloop/attempt-0002 ] && [ ! -d runs/crashloop/attempt-0003 ] || fail "expected exactly 3 attempts"
expect_no_leftovers
echo "ok"
