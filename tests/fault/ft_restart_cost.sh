# The restart cost R measured in a real run (issue 17, item 6). The example fine-tune with
# --ckpt-every auto under `ftl run`, a fleet ledger named in the job spec; a rank is SIGKILLed after
# the first commit, and again after the resumed attempt commits. The launcher measures each
# restart (the failure's detection to the next attempt's first step) and records it in the run's
# ledger and the fleet's; then:
#   - failures.jsonl and the fleet ledger hold two restart records with a plausible R;
#   - `ftl status --json` shows R measured, and `ftl status` and `ftl report` say so;
#   - the cadence of the first attempt says R is assumed, that of the third says measured, over
#     both restarts (the second being the one that started it);
#   - a second job with the same fleet ledger, which never fails, starts from the measured R.
# No tight timing: R only has to be above 0 and below 30 s (a restart here takes a second or two).
FT_STEPS=${FT_STEPS:-150}
. "$(dirname "$0")/ft_lib.sh" || exit 1
FT_EVERY=auto
write_job job.yaml rcost 2 "fleet_ledger: fleet.jsonl" "restart: {max_restarts: 4, backoff_s: 0.1}"
write_job job2.yaml rcost2 2 "fleet_ledger: fleet.jsonl"

# kill_rank RANK: SIGKILL that rank's fine-tune (this test's, by its marker).
kill_rank() {
  local p
  p=$(rank_pid runs/rcost "$MARKER" "$1" ftl-finetune) # the running attempt's, not the standby's
  [ -n "$p" ] && kill -KILL "$p"
}
wait_until_show() { cat out >&2; } # wait_until's report (tests/launcher/lib.sh)
restarts_in() {
  local n=0
  [ -f "$1" ] && n=$(grep -c '"record":"restart"' "$1")
  echo "${n:-0}"
}
has_cadence() { grep -q '"event":"cadence"' runs/rcost/events.jsonl 2>/dev/null; }
has_restart() { [ "$(restarts_in runs/rcost/failures.jsonl)" -ge 1 ]; }
committed_past() { [ "$(newest_commit runs/rcost)" -gt "$1" ]; }
newest_commit() { committed_steps "$1" | sort -n | tail -1; }

ftl run job.yaml >out 2>&1 &
pid=$!
wait_first_commit runs/rcost
# The first decision (after the first, awaited checkpoint) is the one made before any restart.
wait_until 60 "no cadence event in attempt 0" has_cadence
kill_rank 1 || fail "no rank 1 to kill in attempt 0"
# The resumed attempt's first step closes the first measurement; then it commits past the step it
# restored, and rank 1 is killed again.
wait_until 60 "no restart record in runs/rcost/failures.jsonl" has_restart
restored=$(newest_commit runs/rcost)
wait_until 60 "attempt 1 committed nothing past step $restored" committed_past "$restored"
kill_rank 1 || fail "no rank 1 to kill in attempt 1 (did it finish already?)"
wait_rc $pid
expect_rc 0 out
[ "$(ledger_count runs/rcost/failures.jsonl)" -eq 2 ] || { cat runs/rcost/failures.jsonl >&2; fail "expected two failures"; }
[ "$(restarts_in runs/rcost/failures.jsonl)" -eq 2 ] || { cat runs/rcost/failures.jsonl >&2; fail "expected two restart records"; }
[ "$(restarts_in fleet.jsonl)" -eq 2 ] || { cat fleet.jsonl >&2; fail "expected the two restart records in the fleet ledger"; }
grep '"record":"restart"' runs/rcost/failures.jsonl

ftl status runs/rcost --json >status.json || fail "ftl status --json failed"
run_ftl status.txt status runs/rcost
expect_rc 0 status.txt
expect_contains status.txt "restart cost: R = "
expect_contains status.txt "(measured: median of the newest 2 of 2 restarts"
grep "restart cost" status.txt
run_ftl report.out report runs/rcost -o report.html
expect_rc 0 report.out
expect_contains report.html "Restart cost: R = "
grep -qF "(measured: median" report.html || fail "the report does not say R is measured"
grep '"event":"cadence"' runs/rcost/events.jsonl >cadence.jsonl || fail "no cadence events"

run_ftl out2 run job2.yaml
expect_rc 0 out2
grep '"event":"cadence"' runs/rcost2/events.jsonl >cadence2.jsonl || fail "no cadence events in the second run"
python3 - <<'PY' || fail "the restart cost was not measured, recorded or taken as expected"
import json, re, statistics
def lines(path, record=None):
    out = [json.loads(l) for l in open(path) if l.strip()]
    return [o for o in out if record is None or o.get("record") == record]
restarts = lines("runs/rcost/failures.jsonl", "restart")
failures = lines("runs/rcost/failures.jsonl", "failure")
for r in restarts:
    assert 0 < r["restart_s"] < 30, f"implausible R {r['restart_s']} s"
    assert r["job"] == "rcost" and r["world_size"] == 2 and r["cause"] == "signal", r
assert [r["attempt"] for r in restarts] == [1, 2], restarts
assert [f["attempt"] for f in failures] == [0, 1], failures
# The restored step: the one the resumed attempt's rank 0 restored (from its ckpt_restored event).
events = lines("runs/rcost/events.jsonl")
restored = {e["attempt"]: e["step"] for e in events if e["event"] == "ckpt_restored" and e.get("rank") == 0}
assert [r["step"] for r in restarts] == [restored[1], restored[2]], (restarts, restored)
# Each R is at most the wall time from the failure event to the startup event (both written by the
# launcher), and covers most of it (the two are taken a moment apart).
for r in restarts:
    fail_t = next(e["t_us"] for e in events if e["event"] == "failure" and e["attempt"] == r["attempt"] - 1)
    start_t = next(e["t_us"] for e in events if e["event"] == "startup" and e["attempt"] == r["attempt"])
    span = (start_t - fail_t) / 1e6
    assert abs(r["restart_s"] - span) < 0.5, f"R {r['restart_s']} s, but the events span {span:.3f} s"
fleet = lines("fleet.jsonl", "restart")
assert [(f["wall_us"], f["restart_s"]) for f in fleet] == [(r["wall_us"], r["restart_s"]) for r in restarts]

st = json.load(open("status.json"))
cost = st["restart_cost"]
median = statistics.median(r["restart_s"] for r in restarts)
assert cost["measured"] is True and cost["samples"] == 2, cost
assert abs(cost["restart_s"] - median) < 1e-6, (cost, median)
assert len(cost["records"]) == 2 and not any(f.get("restart_s") for f in st["failures"]), st
print(f"ftl status --json: restart_cost.restart_s = {cost['restart_s']:.3f} s (measured over {cost['samples']})")

R = re.compile(r"R = ([0-9.e+]+) (s|min) \((measured|assumed)\)")
def r_of(e):
    m = R.search(e["explanation"])
    assert m, e["explanation"]
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1), m.group(3)
cad = [json.loads(l) for l in open("cadence.jsonl")]
first = [e for e in cad if e["attempt"] == 0]
third = [e for e in cad if e["attempt"] == 2]
assert first and third, "expected cadence decisions in attempts 0 and 2"
print("before a restart (attempt 0):", first[0]["explanation"])
print("after a restart  (attempt 2):", third[0]["explanation"])
assert r_of(first[0]) == (60.0, "assumed"), first[0]["explanation"]
r3, how3 = r_of(third[0])
assert how3 == "measured", third[0]["explanation"]
# The third attempt's cadence takes the R of the restart that began it too (the example waits to
# see it in the ledger, examples/finetune/cadence_plan.c): the median of both restarts.
assert abs(r3 - median) <= 0.06 * median + 0.01, (r3, median, restarts)

cad2 = [json.loads(l) for l in open("cadence2.jsonl")]
print("a new run with the same fleet ledger (attempt 0):", cad2[0]["explanation"])
r2, how2 = r_of(cad2[0])
assert how2 == "measured" and cad2[0]["attempt"] == 0, cad2[0]["explanation"]
assert abs(r2 - median) <= 0.06 * median + 0.01, (r2, median)
assert not lines("runs/rcost2/failures.jsonl", "restart"), "the second run did not restart"
PY
expect_no_leftovers
echo "ok"
