# A rank stopped with SIGSTOP under the default step timeout (180 s): the agent sees its process
# stopped (state T), so ftl names it as hung after a few of the agent's reports, without waiting out
# the timeout, ends the gang and restarts; the second attempt finishes.
. "$(dirname "$0")/lib.sh" || exit 1
probe_job job.yaml hang-default 3 "--steps 40 --step-ms 20 --stop-rank 1 --stop-step 10" "restart: {backoff_s: 0.1}"
start=$(date +%s)
timeout 120 ftl run --kill-grace-ms 500 job.yaml >out 2>&1
RC=$?
took=$(($(date +%s) - start))
expect_rc 0 out
expect_contains out "rank 1 on host $(hostname -s) hung: its process is stopped"
expect_contains out "probe: finished 40 steps"
grep -q '"cause":"hang"' runs/hang-default/failures.jsonl || fail "ledger cause is not hang"
stopped=$(grep -o 'state T for [0-9.]* s' out | head -1 | grep -o '[0-9.]*')
silence=$(grep -o 'no progress for [0-9.]* s' out | head -1 | grep -o '[0-9.]*')
print_latency "stopped rank (step timeout 180 s)" "$(awk -v s="$silence" 'BEGIN { print s * 1000 }')"
echo "seen stopped for ${stopped} s; whole job ${took} s"
awk -v s="$silence" 'BEGIN { exit !(s < 6.0) }' || fail "stopped rank noticed after ${silence} s (goal: a few seconds)"
if grep -q suspect out; then fail "a single-host run called its host suspect"; fi
expect_no_leftovers
echo "ok"
