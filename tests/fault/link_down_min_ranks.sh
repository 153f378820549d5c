# A host's link goes down mid-run (3 hosts x 2 ranks, no spare, min_ranks 4): its agents fall
# silent, ftl declares the host lost after timeouts.node_s, the cut-off agents end their own ranks,
# and the job continues with 4 ranks on the 2 hosts left, from its last save.
. "$(dirname "$0")/netns_lib.sh" || exit 1
netns_up 3
netns_hostfile 3 > hosts
probe_job job.yaml linkdown 6 "--steps 60 --step-ms 50 --save-every 5" \
  "min_ranks: 4" \
  "hostfile: hosts" \
  "timeouts: {node_s: 3, startup_s: 60}" \
  "rendezvous: {timeout_s: 30}" \
  "restart: {backoff_s: 0.2}"
start_job job.yaml
wait_for_event runs/linkdown first_step
sleep 1
t0=$(date +%s%N)
link_down 2
wait_rc $pid
expect_rc 0 out
expect_contains out "host $NS_PREFIX-h2 is lost"
expect_contains out "continuing with 4 ranks instead of 6"
expect_contains out "probe: finished 60 steps"
lag_ms=$(failure_lag_ms runs/linkdown "$t0")
print_latency "node loss (link down, node_s 3 s)" "$lag_ms"
[ "$lag_ms" -le 10000 ] || fail "link loss noticed after $lag_ms ms (goal: 10 s)"
# The cut-off host's ranks ended themselves.
sleep 4
[ -z "$(ip netns pids "$NS_PREFIX-h2" | xargs -r ps -o comm= -p 2>/dev/null | grep fault_probe)" ] ||
  fail "ranks on the cut-off host are still running"
echo "ok"
