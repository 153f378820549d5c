# Preemption: SIGTERM to ftl asks the ranks to stop; they save and exit 0, and ftl exits 75
# ("requeue me"). Running ftl again on the same run directory resumes where they stopped.
. "$(dirname "$0")/lib.sh" || exit 1
probe_job job.yaml preempt 2 "--steps 200 --step-ms 20 --save-every 0" "preemption: {grace_s: 10}"
ftl run job.yaml >out 2>&1 &
pid=$!
wait_for_event runs/preempt first_step
sleep 0.5
kill -TERM $pid
wait_rc $pid
expect_rc 75 out
expect_contains out "preempted by SIGTERM: saved step"
expect_contains out "stopped cleanly on SIGTERM"
saved=$(cat runs/preempt/probe-step)
[ "$saved" -gt 0 ] && [ "$saved" -lt 200 ] || fail "saved step $saved is not inside the run"
run_ftl out2 run job.yaml
expect_rc 0 out2
expect_contains out2 "probe: attempt 1 starts at step $saved of 200"
expect_contains out2 "probe: finished 200 steps"
[ "$(ledger_count runs/preempt/failures.jsonl)" -eq 0 ] || fail "a preemption is not a failure"
expect_no_leftovers
echo "ok"
