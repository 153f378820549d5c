# A rank stopped with SIGSTOP (a hang: mpirun never notices one): no progress for timeouts.step_s,
# so ftl names that rank, says its process is stopped, ends the gang, and restarts; the second
# attempt finishes. The detection latency must be within the timeout + 1 s.
. "$(dirname "$0")/lib.sh" || exit 1
probe_job job.yaml hang 3 "--steps 40 --step-ms 20 --stop-rank 1 --stop-step 10" \
  "timeouts: {step_s: 2}" \
  "restart: {backoff_s: 0.1}"
run_ftl out run --kill-grace-ms 500 job.yaml
expect_rc 0 out
expect_contains out "rank 1 on host $(hostname -s) hung: no progress for"
expect_contains out "its process is stopped"
expect_contains out "probe: finished 40 steps"
grep -q '"cause":"hang"' runs/hang/failures.jsonl || fail "ledger cause is not hang"
silence=$(grep -o 'no progress for [0-9.]* s' out | head -1 | grep -o '[0-9.]*')
print_latency "hang (timeout 2 s)" "$(awk -v s="$silence" 'BEGIN { print s * 1000 }')"
awk -v s="$silence" 'BEGIN { exit !(s < 3.0) }' || fail "hang noticed after ${silence} s (goal: timeout + 1 s)"
expect_no_leftovers
echo "ok"
