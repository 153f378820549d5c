# A black-holed host in the hostfile: its network is down from the start. mpirun waits silently for
# its daemon, no rank starts anywhere, and the launch deadline ends the attempt; nothing names the
# host, so before the fix every attempt repeated it. Now ftl probes the hostfile's hosts (a TCP
# connection to restart.probe_port; a refusal is an answer), leaves out the one that does not
# answer, naming it in the output and in the failure ledger, and the spare completes the job.
# With no spare to take its place the job stops after that one attempt, naming it.
. "$(dirname "$0")/netns_lib.sh" || exit 1
netns_up 4
# Host 1 runs ftl and is not in the hostfile; hosts 2..4 hold 2 slots each, 4 ranks fit on two.
printf '%s slots=2\n' $NET.2 $NET.3 $NET.4 > hosts
link_down 3
probe_job job.yaml blackholed 4 "--steps 20 --step-ms 20" \
  "hostfile: hosts" \
  "rendezvous: {timeout_s: 8}" \
  "restart: {backoff_s: 0.1}  # restart.probe_port: 22 by default"
t0=$(date +%s)
run_job out job.yaml
echo "the job took $(( $(date +%s) - t0 )) s"
expect_rc 0 out
expect_contains out "launch deadline of 8.0 s passed"
# The ranks that never started are named with the host the plan put them on.
expect_contains out "4 of 4 ranks never started (ranks 0 on $NET.2, 1 on $NET.2, 2 on $NET.3, 3 on $NET.3)"
expect_contains out "host $NET.3 cannot be reached: no answer on TCP port 22"
expect_contains out "probe: finished 20 steps"
expect_host_left_out runs/blackholed "$NET.3"
[ "$(ls -d runs/blackholed/attempt-* | wc -l)" -eq 2 ] || fail "expected one launch-deadline attempt and one that completes"

# No spare: 4 ranks need both hosts; the job stops after the first launch deadline, naming it
# (exit 4, as for any launch deadline that ends a job).
printf '%s slots=2\n' $NET.2 $NET.3 > hosts2
sed -e 's/^name: blackholed/name: nospare/' -e 's/^hostfile: hosts/hostfile: hosts2/' job.yaml > job2.yaml
run_job out2 job2.yaml
expect_rc 4 out2
expect_contains out2 "cannot go on: the hosts left hold 2 slots, fewer than the 4 ranks it needs"
expect_contains out2 "left out: unreachable host $NET.3 (no answer on port 22)"
[ "$(ls -d runs/nospare/attempt-* | wc -l)" -eq 1 ] || fail "the job was relaunched without the hosts it needs"
echo "ok"
