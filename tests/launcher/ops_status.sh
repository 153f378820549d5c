# `ftl status RUNDIR [--json]` while a run of the example fine-tune runs and after it ended: rank 1
# is killed mid-checkpoint at step 20 (a crash point), the launcher restarts the gang once, and the
# run completes. While it runs: "running" (the run-directory lock is held). After: ended with exit
# code 0, two attempts (failed, succeeded), the failure with its cause and host, the cadence and
# its inputs, the last committed step from the checkpoints, the goodput breakdown (the run's own).
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
ARGS=("${FT_ARGS[@]}" --ckpt-every 5 --throttle-ms 60)
FTL_CRASH_AT=mid_shard FTL_CRASH_RANK=1 FTL_CRASH_STEP=20 \
  ftl run -n 2 --max-restarts 1 --progress off --run-dir run -- ftl-finetune "${ARGS[@]}" >run.out 2>&1 &
pid=$!
seen=0
for _ in $(seq 400); do
  if ftl status run --json >live.json 2>/dev/null &&
     python3 -c 'import json,sys; d=json.load(open("live.json")); sys.exit(0 if d["state"]=="running" and d["progress"] else 1)'; then
    seen=1
    break
  fi
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
ftl status run >live.txt 2>&1 || fail "ftl status failed while the job ran"
wait_rc $pid
expect_rc 0 run.out
[ $seen = 1 ] || { cat live.json; fail "ftl status never said running (with progress) while the job ran"; }
python3 - live.json <<'PY' || fail "bad status while running"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 1, d["version"]
assert d["exit_code"] is None, d["exit_code"]
assert d["lock_held"] is True, d["lock_held"]  # RUNDIR/ftl.lock, held by the launcher
assert d["attempts"] and d["attempts"][-1]["outcome"] == "running", d["attempts"]
assert d["goodput"]["final"] is False
PY

ftl status run --json >final.json || fail "ftl status --json failed"
python3 - final.json "$(hostname -s)" <<'PY' || { cat final.json; fail "bad status after the run"; }
import json, sys
d = json.load(open(sys.argv[1]))
host = sys.argv[2]
def check(cond, what):
    if not cond:
        sys.exit("status: " + what)
check(d["version"] == 1, "version")
check(d["state"] == "ended" and d["exit_code"] == 0, "state %s exit_code %s" % (d["state"], d["exit_code"]))
check(d["lock_held"] in (False, None), "lock still held")
check([a["outcome"] for a in d["attempts"]] == ["failed", "succeeded"], "outcomes %s" % [a["outcome"] for a in d["attempts"]])
check(d["restarts"] == 1, "restarts %s" % d["restarts"])
f = d["failures"]
check(len(f) == 1 and f[0]["attempt"] == 0 and f[0]["cause"] == "signal" and f[0]["rank"] == 1, "failures %s" % f)
check(f[0]["host"].split(".")[0] == host, "failure host %s" % f[0]["host"])
check(d["last_committed_step"] == 40, "last committed %s" % d["last_committed_step"])
check(d["cadence"] and d["cadence"]["interval_steps"] == 5 and "explanation" in d["cadence"], "cadence %s" % d["cadence"])
check(d["progress"]["step"] == 40 and d["progress"]["total_steps"] == 40, "progress %s" % d["progress"])
g = d["goodput"]
check(g["final"] is True and 0 < g["goodput_pct"] <= 100 and g["lost_work_ms"] > 0, "goodput %s" % g)
parts = g["productive_ms"] + g["startup_ms"] + g["ckpt_stall_ms"] + g["lost_work_ms"] + g["teardown_ms"] + g["backoff_ms"]
check(abs(parts - g["wall_ms"]) < 0.02 * g["wall_ms"] + 50, "goodput parts %s != wall %s" % (parts, g["wall_ms"]))
check(d["gate"] is None and d["published"] is None, "gate/published without eval")
PY
ftl status run >final.txt || fail "ftl status failed"
expect_contains final.txt "state: ended: exit code 0 (succeeded)"
expect_contains final.txt "attempts: 2, restarts: 1"
expect_contains final.txt "attempt 0: signal, rank 1 on host"
expect_contains final.txt "cadence: checkpoint every 5 steps"
expect_contains final.txt "last committed step: 40" # the final step is committed before the adapter
expect_contains final.txt "goodput: "
run_ftl none.out status nowhere
expect_rc 2 none.out
expect_contains none.out "not a run directory"
run_ftl usage.out status
expect_rc 2 usage.out
expect_no_leftovers
echo ok
