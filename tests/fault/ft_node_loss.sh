# Node loss under the fine-tune, on 3 hosts x 2 ranks plus a spare (network namespaces): every
# process of host 3 is killed mid-run; the spare takes its place, the gang resumes from the last
# commit at the same world size, and the adapter is byte-identical to a failure-free 6-rank run.
. "$(dirname "$0")/ft_lib.sh" || exit 1
. "$(dirname "$0")/netns_lib.sh" || exit 1
reference 6
netns_up 4
netns_hostfile 4 > hosts
write_job job.yaml nodeloss 6 "hostfile: hosts" "timeouts: {node_s: 5, startup_s: 60}" "rendezvous: {timeout_s: 30}"
start_job job.yaml
wait_first_commit runs/nodeloss
kill_host 3
wait_rc $pid
expect_rc 0 out
expect_contains out "host $NS_PREFIX-h3 is lost"
expect_contains runs/nodeloss/attempt-0001/hostfile "# left out: $NET.3 slots=2"
same_adapter ref-6/final runs/nodeloss/final
verify_all runs/nodeloss
echo "ok"
