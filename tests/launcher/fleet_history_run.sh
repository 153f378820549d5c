# tests/launcher/fleet_history_run.sh: a host's history outlives the job (docs/formats/fleet-ledger.md,
# "Per-host history"), on this one host through the fake NVML (FTL_NVML_FAKE; no GPU here):
#  1. a GPU that starts thermal-throttling mid-run: the job's fleet ledger gets a gpu_health record
#     (degraded, with the reason, the host's name and addresses) and the exposure split by host;
#     `ftl fleet` lists the host as degraded;
#  2. a GPU whose uncorrectable ECC count rises: a gpu_health record (failed), the failure record
#     names the GPU; `ftl fleet` lists the host as bad, worst first, in text and JSON;
#  3. a new job whose hostfile names the bad host and a spare (this machine by another name): the
#     bad host is left out before the first attempt (a console line says why, a fleet_hosts event),
#     the spare runs the ranks; with the degraded history, the host is moved behind the spare; with
#     no spare, the bad host is kept with a warning;
#  4. `ftl fleet` on bad input: no ledger, a folder, malformed lines (named PATH:LINE), bad --days.
. "$(dirname "$0")/lib.sh" || exit 1
export FTL_GPU_HEALTH_MS=200
host=$(hostname | cut -d. -f1)
case "$host" in "" | localhost | 127.*) echo "SKIP: this machine's name ($host) cannot be told from localhost"; exit 77 ;; esac

# A job spec: NAME RUNDIR LEDGER [HOSTFILE] [RANKS], running until $SCRATCH/go exists.
spec() {
  {
    echo "name: $1"
    echo "ranks: ${5:-2}"
    echo "program: sh"
    echo "args: [\"-c\", \"while [ ! -e '$SCRATCH/go' ]; do sleep 0.05; done # $MARKER\"]"
    echo "run_dir: $2"
    echo "fleet_ledger: $3"
    [ -n "${4:-}" ] && echo "hostfile: $4"
    echo "restart: {max_restarts: 0}"
  } >"$1.yaml"
}

# 1. degraded mid-run
cat >degraded.json <<'JSON'
{"version": 1, "devices": [{"readings": [
  {"uuid": "GPU-aaaa", "name": "NVIDIA H100 80GB HBM3", "temperature_c": 60},
  {}, {},
  {"throttle": ["hw_thermal"], "temperature_c": 92}
]}]}
JSON
spec deg-job deg "$PWD/fleet-deg.jsonl"
FTL_NVML_FAKE=$PWD/degraded.json ftl run deg-job.yaml >deg.out 2>&1 &
pid=$!
degraded_seen() { grep '"event":"gpu_health"' deg/events.jsonl 2>/dev/null | grep -q '"verdict":"degraded"'; }
wait_until 30 "no degraded verdict in deg/events.jsonl" degraded_seen
touch go
wait_rc $pid
expect_rc 0 deg.out
grep '"record":"gpu_health"' fleet-deg.jsonl | grep -q "\"host\":\"$host\".*\"gpu\":\"GPU-aaaa\".*\"verdict\":\"degraded\"" ||
  { cat fleet-deg.jsonl >&2; fail "no degraded gpu_health record in the fleet ledger"; }
grep '"record":"gpu_health"' fleet-deg.jsonl | grep -q '"reason":"[^"]*thermal' || fail "the record has no reason"
# the host's addresses (not the loopback ones, every host's), where it has any
if hostname -I 2>/dev/null | tr ' ' '\n' | grep -qE '^[0-9]+\.' ; then
  grep '"record":"gpu_health"' fleet-deg.jsonl | grep -q '"addrs":"[0-9]' || fail "the record has no host addresses"
fi
! grep -q '"addrs":"[^"]*127\.' fleet-deg.jsonl || fail "a loopback address went into the fleet ledger"
grep '"record":"exposure"' fleet-deg.jsonl | grep -q "\"hosts\":{\"$host\":" ||
  { cat fleet-deg.jsonl >&2; fail "the exposure is not split by host"; }
grep '"record":"exposure"' deg/failures.jsonl | grep -q "\"hosts\":{\"$host\":" ||
  fail "the run's ledger has not the same exposure record"
run_ftl fleet-deg.out fleet fleet-deg.jsonl
expect_rc 0 fleet-deg.out
expect_contains fleet-deg.out "1 host with records in the last 7 days: 0 bad, 1 degraded"
grep -E "^  $host +degraded " fleet-deg.out >/dev/null || { cat fleet-deg.out >&2; fail "ftl fleet does not list the host as degraded"; }
expect_contains fleet-deg.out "GPU GPU-aaaa degraded ("
expect_contains fleet-deg.out "ago in job deg-job"
rm -f go

# 2. a GPU fails mid-run
cat >failing.json <<'JSON'
{"version": 1, "devices": [{"readings": [
  {"uuid": "GPU-bbbb", "name": "NVIDIA H100 80GB HBM3"}, {}, {},
  {"ecc": {"uncorrected_volatile": 1, "uncorrected_aggregate": 1}}
]}]}
JSON
spec fail-job fail "$PWD/fleet-bad.jsonl"
FTL_NVML_FAKE=$PWD/failing.json run_ftl fail.out run fail-job.yaml
expect_rc 1 fail.out
grep '"record":"gpu_health"' fleet-bad.jsonl | grep -q "\"host\":\"$host\".*\"gpu\":\"GPU-bbbb\".*\"verdict\":\"failed\"" ||
  { cat fleet-bad.jsonl >&2; fail "no failed gpu_health record in the fleet ledger"; }
grep '"record":"failure"' fleet-bad.jsonl | grep -q '"cause":"gpu_failed".*"gpu":"GPU-bbbb"' ||
  { cat fleet-bad.jsonl >&2; fail "the failure record does not name the GPU"; }
# the GPU's record comes before the failure's
[ "$(grep -n '"record":"gpu_health"' fleet-bad.jsonl | head -1 | cut -d: -f1)" -lt \
  "$(grep -n '"record":"failure"' fleet-bad.jsonl | head -1 | cut -d: -f1)" ] || fail "the failure was written before the GPU's verdict"
cat fleet-deg.jsonl >>fleet-bad.jsonl
run_ftl fleet-bad.out fleet fleet-bad.jsonl
expect_rc 0 fleet-bad.out
grep -E "^  $host +bad +1 +1 " fleet-bad.out >/dev/null || { cat fleet-bad.out >&2; fail "ftl fleet does not list the host as bad"; }
expect_contains fleet-bad.out "GPU GPU-bbbb failed ("
run_ftl fleet-bad.json fleet --json --days 2 fleet-bad.jsonl
expect_rc 0 fleet-bad.json
/usr/bin/python3 - fleet-bad.json "$host" <<'PY' || fail "ftl fleet --json is not what docs/formats/fleet.md says"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["version"] == 1 and doc["window_days"] == 2 and doc["skipped"] == 0, doc
h = doc["hosts"][0]
assert h["host"] == sys.argv[2] and h["standing"] == "bad" and h["gpus_failed"] == 1 and h["gpu_failures"] == 1, h
assert h["job"] == "fail-job" and h["reason"].startswith("GPU GPU-bbbb failed"), h
assert h["rank_hours"] > 0 and h["last_seen_us"] >= h["since_us"] > 0 and h["addrs"], h
PY

# 3. a new job with a spare: the bad host is left out before it starts. The hostfile names this
# machine twice, by its name and by 127.0.0.1 (which no host's history holds: the spare). Open MPI
# takes the two names for one node, so only a job that leaves one out can run here; the order of a
# plan with both is test_fleet's (tests/launcher/test_fleet.c).
printf '%s slots=2\n127.0.0.1 slots=2\n' "$host" >hosts
printf '%s slots=2\n' "$host" >alone
spec skip-job skip "$PWD/fleet-bad.jsonl" hosts
echo '{"version": 1, "missing": true}' >missing.json
touch go
FTL_NVML_FAKE=$PWD/missing.json run_ftl skip.out run skip-job.yaml
expect_rc 0 skip.out
expect_contains skip.out "ftl: host $host left out: GPU GPU-bbbb failed ("
expect_contains skip.out "ago in job fail-job"
expect_contains skip/attempt-0000/hostfile "# left out: $host slots=2"
grep '"event":"fleet_hosts"' skip/events.jsonl >skip.ev || fail "no fleet_hosts event"
for field in '"left_out":1' "\"host\":\"$host\"" '"action":"left_out"' '"standing":"bad"' '"job":"fail-job"'; do
  grep -qF -- "$field" skip.ev || { cat skip.ev >&2; fail "the fleet_hosts event lacks $field"; }
done
# ... the degraded history moves the host to the end of the plan (alone, it still runs the ranks)
spec move-job move "$PWD/fleet-deg.jsonl" alone
FTL_NVML_FAKE=$PWD/missing.json run_ftl move.out run move-job.yaml
expect_rc 0 move.out
expect_contains move.out "ftl: host $host moved to the end of the hostfile (the hosts before it hold 0 of the 2 ranks): GPU GPU-aaaa degraded ("
grep '"event":"fleet_hosts"' move/events.jsonl | grep -q '"action":"moved"' || fail "no moved in fleet_hosts"
# ... and without a spare the bad host is kept, with a warning
spec keep-job keep "$PWD/fleet-bad.jsonl" alone
FTL_NVML_FAKE=$PWD/missing.json run_ftl keep.out run keep-job.yaml
expect_rc 0 keep.out
expect_contains keep.out "ftl: host $host kept although its history is bad (GPU GPU-bbbb failed ("
grep '"event":"fleet_hosts"' keep/events.jsonl | grep -q '"action":"kept_bad"' || fail "no kept_bad in fleet_hosts"
# ... and fleet.history_days: 0 reads no history
spec nohist-job nohist "$PWD/fleet-bad.jsonl" alone
echo "fleet: {history_days: 0}" >>nohist-job.yaml
FTL_NVML_FAKE=$PWD/missing.json run_ftl nohist.out run nohist-job.yaml
expect_rc 0 nohist.out
! grep -q "kept although" nohist.out || fail "history_days 0 still read the history"
! grep -q '"event":"fleet_hosts"' nohist/events.jsonl || fail "history_days 0 still wrote fleet_hosts"

# 4. bad input
run_ftl none.out fleet no-such.jsonl
expect_rc 1 none.out
expect_contains none.out "no such fleet ledger"
run_ftl dir.out fleet .
expect_rc 1 dir.out
expect_contains dir.out "not a regular file"
printf '{"version":1,"record":"gpu_health","host":"x"}\nnot json\n' >>fleet-bad.jsonl
run_ftl mal.out fleet fleet-bad.jsonl
expect_rc 0 mal.out
expect_contains mal.out "2 lines skipped, the first: fleet-bad.jsonl:"
expect_contains mal.out "field \"gpu\" is missing"
run_ftl days.out fleet --days 0 fleet-bad.jsonl
expect_rc 2 days.out
expect_contains days.out "--days: '0' is not a whole number of days from 1 to 3650"
run_ftl usage.out fleet
expect_rc 2 usage.out
expect_no_leftovers
echo ok
