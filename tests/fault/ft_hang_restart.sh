# A fine-tune rank stopped with SIGSTOP: ftl sees no progress for timeouts.step_s, names it, ends
# the gang and restarts it from the last commit; the adapter is byte-identical to a failure-free run.
. "$(dirname "$0")/ft_lib.sh" || exit 1
reference 4
write_job job.yaml hang 4 "timeouts: {step_s: 2}"
ftl run --kill-grace-ms 500 job.yaml >out 2>&1 &
pid=$!
wait_first_commit runs/hang
victim=$(rank_pid runs/hang "$MARKER" 2 ftl-finetune) # the running attempt's, not the standby's
[ -n "$victim" ] || fail "rank 2 not found"
kill -STOP "$victim"
wait_rc $pid
expect_rc 0 out
expect_contains out "rank 2 on host $(hostname -s) hung"
expect_contains out "its process is stopped"
same_adapter ref-4/final runs/hang/final
verify_all runs/hang
expect_no_leftovers
echo "ok"
