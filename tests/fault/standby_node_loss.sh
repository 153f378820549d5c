# Labelled long (the normal build's suite only, not the sanitizer builds): on these netns hosts,
# which share two cores, a standby's start-up has been seen to stall the running gang on one host
# until it is called lost (docs/fault-tolerance.md, "Open: several hosts").
# A lost host with a standby parked (docs/fault-tolerance.md, warm restarts): 3 hosts x 2 ranks and
# a spare, a standby gang parked on the 3 hosts, then every process of host 3 killed. The standby
# loses its ranks there with the host: it is dropped, the cold path runs on the spare as without a
# standby, and a new standby parks on the new placement (the next attempt's hostfile).
. "$(dirname "$0")/netns_lib.sh" || exit 1
netns_up 4
netns_hostfile 4 > hosts
probe_job job.yaml sbloss 6 "--steps 200 --step-ms 50 --save-every 5" \
  "hostfile: hosts" \
  "timeouts: {node_s: 5, startup_s: 60}" \
  "rendezvous: {timeout_s: 30}" \
  "restart: {backoff_s: 0.2, standby: on}"
start_job job.yaml
wait_for_event runs/sbloss standby_parked out
kill_host 3
wait_rc $pid
expect_rc 0 out
expect_contains out "host $NS_PREFIX-h3 is lost"
expect_contains out "probe: finished 200 steps"
ev=runs/sbloss/events.jsonl
grep '"event":"standby_lost"' $ev | grep -q '"attempt":1[,}]' || fail "the standby parked for attempt 1 was not dropped"
grep '"event":"attempt_start"' $ev | grep '"attempt":1[,}]' | grep -q '"launcher":"mpirun"' ||
  fail "attempt 1 did not start cold after the host loss"
grep '"event":"standby_activated"' $ev && fail "a standby missing a host was activated"
grep '"event":"rank_started"' $ev | grep '"attempt":1[,}]' | grep -q "\"host\":\"$NS_PREFIX-h4\"" ||
  fail "the spare host did not take the lost host's place"
grep '"event":"standby_started"' $ev | grep '"attempt":2[,}]' | grep -q 'attempt-0001/hostfile' ||
  fail "no standby started on attempt 1's placement"
grep '"event":"standby_parked"' $ev | grep -q '"attempt":2[,}]' || fail "no standby parked for attempt 2"
expect_contains runs/sbloss/attempt-0001/hostfile "# left out: $NET.3 slots=2"
echo "ok"
