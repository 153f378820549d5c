# A host's link goes down under the fine-tune (3 hosts x 2 ranks, no spare, min_ranks 4): the gang
# continues with 4 ranks, the checkpoint reshards from 6 to 4, and the run completes. The global
# batch is the same but split 4 ways, so the adapter is not byte-identical to a 6-rank run: the
# documented tolerance (docs/fault-tolerance.md) is on the held-out metrics: exact match within 5
# points and loss within 25% of the failure-free 6-rank run's.
. "$(dirname "$0")/ft_lib.sh" || exit 1
. "$(dirname "$0")/netns_lib.sh" || exit 1
reference 6
netns_up 3
netns_hostfile 3 > hosts
write_job job.yaml linkdown 6 "hostfile: hosts" "min_ranks: 4" "timeouts: {node_s: 3, startup_s: 60}" \
  "rendezvous: {timeout_s: 30}"
start_job job.yaml
wait_first_commit runs/linkdown
link_down 2
wait_rc $pid
expect_rc 0 out
expect_contains out "host $NS_PREFIX-h2 is lost"
expect_contains out "continuing with 4 ranks instead of 6"
expect_contains runs/linkdown/attempt-0001/rank-00000.out "(written by 6 ranks"
metrics() { grep -o 'with the adapter: loss [0-9.]*, exact match [0-9.]*%' "$1" | tail -1 | grep -o '[0-9.]*'; }
read -r ref_loss ref_em < <(metrics ref-6.out | tr '\n' ' ')
read -r loss em < <(metrics out | tr '\n' ' ')
echo "held-out with the adapter: failure-free 6 ranks loss $ref_loss, exact match $ref_em%; resharded 6 -> 4: loss $loss, exact match $em%"
awk -v a="$em" -v b="$ref_em" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 5) }' || fail "exact match off by more than 5 points"
awk -v a="$loss" -v b="$ref_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.25 * b + 0.01) }' || fail "loss off by more than 25%"
verify_all runs/linkdown
echo "ok"
