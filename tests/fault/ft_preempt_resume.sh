# Preemption of the fine-tune: SIGTERM to ftl; the ranks save, commit and stop (exit 75); a rerun
# on the same run directory resumes there, and the adapter is byte-identical to a failure-free run.
. "$(dirname "$0")/ft_lib.sh" || exit 1
reference 4
write_job job.yaml preempt 4
ftl run job.yaml >out 2>&1 &
pid=$!
wait_first_commit runs/preempt
sleep 0.3
kill -TERM $pid
wait_rc $pid
expect_rc 75 out
expect_contains out "checkpoint of step"
expect_contains out "stopping"
run_ftl out2 run job.yaml
expect_rc 0 out2
expect_contains out2 "resumed from the checkpoint of step"
same_adapter ref-4/final runs/preempt/final
[ "$(ledger_count runs/preempt/failures.jsonl)" -eq 0 ] || fail "a preemption is not a failure"
expect_no_leftovers
echo "ok"
