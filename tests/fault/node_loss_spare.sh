# Node loss on 3 hosts x 2 ranks with a spare: every process of host 3 is killed mid-run. ftl names
# the lost host (within timeouts.node_s + 1 s at worst), leaves it out, the spare host 4 takes its
# place, and the job finishes from its last save.
. "$(dirname "$0")/netns_lib.sh" || exit 1
netns_up 4
netns_hostfile 4 > hosts
probe_job job.yaml nodeloss 6 "--steps 60 --step-ms 50 --save-every 5" \
  "hostfile: hosts" \
  "timeouts: {node_s: 5, startup_s: 60}" \
  "rendezvous: {timeout_s: 30}" \
  "restart: {backoff_s: 0.2}"
start_job job.yaml
wait_for_event runs/nodeloss first_step
sleep 1
t0=$(date +%s%N)
kill_host 3
wait_rc $pid
expect_rc 0 out
expect_contains out "host $NS_PREFIX-h3 is lost"
expect_contains runs/nodeloss/attempt-0001/hostfile "# left out: $NET.3 slots=2"
grep '"event":"rank_started"' runs/nodeloss/events.jsonl | grep '"attempt":1' | grep -q "\"host\":\"$NS_PREFIX-h4\"" ||
  fail "the spare host did not take the lost host's place"
expect_contains out "probe: finished 60 steps"
grep -q '"cause":"node_lost"' runs/nodeloss/failures.jsonl || fail "ledger cause is not node_lost"
lag_ms=$(failure_lag_ms runs/nodeloss "$t0")
print_latency "node loss (host killed)" "$lag_ms"
[ "$lag_ms" -le 10000 ] || fail "node loss noticed after $lag_ms ms (goal: 10 s)"
echo "ok"
