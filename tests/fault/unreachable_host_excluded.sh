# A host in the hostfile that cannot be reached (its name does not resolve). Open MPI starts a
# daemon on every host of the hostfile, spares included, so such a host fails every attempt: ftl
# leaves it out like a lost host, naming it in the output and in the failure ledger, and the job
# completes on the others. With no spare to take its place the job stops, naming it.
. "$(dirname "$0")/netns_lib.sh" || exit 1
netns_up 2
bad=ftl-no-such-host.invalid
on_host 1 getent hosts "$bad" >/dev/null && { echo "skipped: $bad resolves here"; exit 77; }

# The unreachable host between two live ones: 4 ranks fit on the live ones.
printf '%s slots=2\n' $NET.1 $bad $NET.2 > hosts
probe_job job.yaml unreachable 4 "--steps 20 --step-ms 20" \
  "hostfile: hosts" \
  "rendezvous: {timeout_s: 30}" \
  "restart: {backoff_s: 0.1}"
run_job out job.yaml
expect_rc 0 out
expect_contains out "host $bad cannot be reached: its name does not resolve"
expect_contains out "probe: finished 20 steps"
expect_host_left_out runs/unreachable "$bad"
[ "$(ls -d runs/unreachable/attempt-* | wc -l)" -eq 2 ] || fail "expected one failed attempt and one that completes"

# No spare: 4 ranks need both hosts; the job stops naming the unreachable one.
printf '%s slots=2\n' $NET.1 $bad > hosts2
sed -e 's/^name: unreachable/name: nospare/' -e 's/^hostfile: hosts/hostfile: hosts2/' job.yaml > job2.yaml
run_job out2 job2.yaml
expect_rc 1 out2
expect_contains out2 "host $bad cannot be reached"
expect_contains out2 "cannot go on: the hosts left hold 2 slots, fewer than the 4 ranks it needs"
expect_contains out2 "left out: unreachable host $bad (the name does not resolve)"
[ "$(ls -d runs/nospare/attempt-* | wc -l)" -eq 1 ] || fail "the job was relaunched without the hosts it needs"
echo "ok"
