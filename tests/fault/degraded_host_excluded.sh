# A degraded GPU on one of 4 (netns) hosts, 3 of which hold the job's 6 ranks: the host's first rank
# agent reports its GPU thermal-throttling (the fake NVML, one file per host through %h) before its
# rank starts; the job goes on. When a rank on another host crashes, the policy (rule 5b,
# launcher/policy.h) leaves the degraded host out of the next attempt, the spare (host 4) takes its
# place, the job finishes from its last save, and the fleet ledger records the verdict. A second job
# on the same fleet ledger starts without the host. Then, with no spare, a degraded host is kept:
# a degraded GPU never costs the gang a rank.
. "$(dirname "$0")/netns_lib.sh" || exit 1
netns_up 4
netns_hostfile 4 > hosts
export FTL_GPU_HEALTH_MS=200
for i in 1 2 3 4; do
  if [ "$i" = 2 ]; then
    echo '{"version": 1, "devices": [{"readings": [{"uuid": "GPU-h2", "name": "NVIDIA H100 80GB HBM3", "throttle": ["hw_thermal"], "temperature_c": 93}]}]}'
  else
    echo "{\"version\": 1, \"devices\": [{\"readings\": [{\"uuid\": \"GPU-h$i\", \"name\": \"NVIDIA H100 80GB HBM3\"}]}]}"
  fi >"gpus-$NS_PREFIX-h$i.json"
done
export FTL_NVML_FAKE=$PWD/gpus-%h.json
# Rank 4 (host 3) crashes at step 12 of the first attempt. Every rank waits for every other at each
# step (the probe's allreduce), and host 2's agent reports before its rank starts, so the verdict is
# in before the crash however slow the machine.
probe_job job.yaml degraded 6 "--steps 40 --step-ms 30 --save-every 5 --fail-rank 4 --fail-step 12 --fail-attempts 1" \
  "hostfile: hosts" \
  "fleet_ledger: $PWD/fleet.jsonl" \
  "timeouts: {node_s: 10, startup_s: 60}" \
  "rendezvous: {timeout_s: 30}" \
  "restart: {backoff_s: 0.2}"
run_job out job.yaml
[ "$RC" = 0 ] || { cat out >&2; fail "the job did not finish (exit $RC)"; }
run=runs/degraded
grep '"event":"gpu_health"' $run/events.jsonl | grep -q "\"host\":\"$NS_PREFIX-h2\".*\"verdict\":\"degraded\"" ||
  { cat $run/events.jsonl >&2; fail "no degraded verdict from host 2"; }
expect_contains out "leaving host $NS_PREFIX-h2 out of the next attempts: its GPU 0 (GPU-h2) is degraded: thermal throttling"
grep '"event":"host_excluded"' $run/events.jsonl | grep -q "\"host\":\"$NS_PREFIX-h2\".*\"reason\":\"gpu_degraded\"" ||
  fail "no host_excluded event for the degraded host"
expect_contains $run/attempt-0001/hostfile "# left out: $NET.2 slots=2"
grep '"event":"rank_started"' $run/events.jsonl | grep '"attempt":1' | grep -q "\"host\":\"$NS_PREFIX-h4\"" ||
  fail "the spare host did not take the degraded host's place"
! grep '"event":"rank_started"' $run/events.jsonl | grep '"attempt":1' | grep -q "\"host\":\"$NS_PREFIX-h2\"" ||
  fail "a rank of attempt 1 ran on the degraded host"
expect_contains out "probe: attempt 1 starts at step 10 of 40"
expect_contains out "probe: finished 40 steps"
# The fleet ledger keeps the host's verdict past the job (docs/formats/fleet-ledger.md).
grep '"record":"gpu_health"' fleet.jsonl | grep -q "\"host\":\"$NS_PREFIX-h2\".*\"verdict\":\"degraded\"" ||
  { cat fleet.jsonl >&2; fail "the fleet ledger does not record host 2's degraded GPU"; }
echo "first job: host 2 left out for its degraded GPU, the spare took its place"

# A second job on the same fleet ledger (host 2's GPU now reads healthy, as a throttling GPU may once
# it cooled): the history says degraded, so host 2 goes behind the spares from the start
# (docs/formats/fleet-ledger.md "Per-host history") and no rank lands there.
echo '{"version": 1, "devices": [{"readings": [{"uuid": "GPU-h2", "name": "NVIDIA H100 80GB HBM3"}]}]}' >"gpus-$NS_PREFIX-h2.json"
probe_job second.yaml second 6 "--steps 20 --step-ms 30" \
  "hostfile: hosts" \
  "fleet_ledger: $PWD/fleet.jsonl" \
  "timeouts: {node_s: 10, startup_s: 60}" \
  "rendezvous: {timeout_s: 30}"
run_job out2 second.yaml
[ "$RC" = 0 ] || { cat out2 >&2; fail "the second job did not finish (exit $RC)"; }
expect_contains out2 "host $NET.2 moved behind the spares"
grep '"event":"fleet_hosts"' runs/second/events.jsonl | grep -q '"action":"moved".*"standing":"degraded"' ||
  fail "no fleet_hosts event moving host 2"
! grep '"event":"rank_started"' runs/second/events.jsonl | grep -q "\"host\":\"$NS_PREFIX-h2\"" ||
  fail "the second job put a rank on the degraded host"
[ "$(grep '"event":"rank_started"' runs/second/events.jsonl | grep -c "\"host\":\"$NS_PREFIX-h4\"")" = 2 ] ||
  fail "the spare host 4 does not hold 2 ranks of the second job"
run_ftl fleet.out fleet fleet.jsonl
expect_contains fleet.out "$NS_PREFIX-h2"
grep "$NS_PREFIX-h2" fleet.out | grep -q degraded || { cat fleet.out >&2; fail "ftl fleet does not list host 2 as degraded"; }
echo "second job: host 2 behind the spares, no rank on it"

# No spare: hosts 1-3 hold exactly the 6 ranks; the degraded host 2 (throttling again) stays in the
# next attempt.
echo '{"version": 1, "devices": [{"readings": [{"uuid": "GPU-h2", "name": "NVIDIA H100 80GB HBM3", "throttle": ["hw_thermal"], "temperature_c": 93}]}]}' >"gpus-$NS_PREFIX-h2.json"
netns_hostfile 3 > hosts3
probe_job nospare.yaml nospare 6 "--steps 30 --step-ms 30 --save-every 5 --fail-rank 4 --fail-step 12 --fail-attempts 1" \
  "hostfile: hosts3" \
  "timeouts: {node_s: 10, startup_s: 60}" \
  "rendezvous: {timeout_s: 30}" \
  "restart: {backoff_s: 0.2}"
run_job out3 nospare.yaml
[ "$RC" = 0 ] || { cat out3 >&2; fail "the job without a spare did not finish (exit $RC)"; }
expect_contains out3 "keeping host $NS_PREFIX-h2 in the next attempt although its GPU 0 (GPU-h2) is degraded"
grep -q '"event":"host_kept_degraded"' runs/nospare/events.jsonl || fail "no host_kept_degraded event"
grep '"event":"rank_started"' runs/nospare/events.jsonl | grep '"attempt":1' | grep -q "\"host\":\"$NS_PREFIX-h2\"" ||
  fail "the degraded host was left out although no spare could take its place"
expect_contains out3 "probe: finished 30 steps"
# Each namespace host's Open MPI daemon keeps its session folder in the shared TMPDIR (a real host's
# is its own), so only the processes are checked here; netns_down removes the folders.
sleep 0.2
! pgrep -f "$MARKER" >/dev/null || fail "processes of the jobs are still running"
echo ok
