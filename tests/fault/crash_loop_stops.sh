# A rank that fails at the same step in every attempt: after restart.crash_loop attempts ftl stops
# with a crash-loop report instead of spending the whole restart budget.
# The steps are longer than the rank's progress interval (250 ms), so the launcher hears every step
# and each attempt ends at the same step it knows of: with 10 ms steps the step it last heard of was
# 1 to 4 by the timing (the flake hunt under load: 1,1,4,1,1 took five attempts, and the ledger had
# five failures where this test counts three).
. "$(dirname "$0")/lib.sh" || exit 1
probe_job job.yaml crashloop 2 "--steps 20 --step-ms 300 --fail-rank 1 --fail-step 3 --save-every 0" \
  "restart: {max_restarts: 10, backoff_s: 0.1, crash_loop: 3}"
run_ftl out run job.yaml
expect_rc 1 out
expect_contains out "crash loop: 3 attempts in a row failed at step"
[ "$(ledger_count runs/crashloop/failures.jsonl)" -eq 3 ] || fail "expected three ledger records"
[ -d runs/crashloop/attempt-0002 ] && [ ! -d runs/crashloop/attempt-0003 ] || fail "expected exactly 3 attempts"
expect_no_leftovers
echo "ok"
