# tests/python/plain_program.sh: a training script written for torchrun that knows nothing of ftl
# (tests/python/plain_ddp.py: RANK, WORLD_SIZE, MASTER_*, gloo, its own torch.save checkpoint) run
# under `ftl run`. It reports no steps, and ftl says so rather than showing step -1: `ftl status`
# ("steps not reported", goodput "not measured", R measured to the ranks' start after a killed rank),
# the report, and the crash-loop message; Ctrl-C stops it at once without a traceback (exit 130, no
# failure recorded) and the same command resumes it from its own checkpoint.
. "$(dirname "$0")/torch_lib.sh" || exit 1
PLAIN=(/usr/bin/python3 "$FTL_SOURCE_DIR/tests/python/plain_ddp.py" --ckpt-dir "$SCRATCH/ck" --steps 100000 --step-ms 20
       --ckpt-every 10)

# rank1_of RUNDIR ATTEMPT: the pid of the python process of rank 1 in that attempt.
rank1_of() { gang_pids "$1" plain_ddp.py 1 "$2" python3 | head -1; }

# A killed rank: ftl restarts the gang; R is measured to the new ranks' start.
ftl run -n 2 --run-dir pd -- "${PLAIN[@]}" >pd.out 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q '^step 30$' pd/attempt-0000/rank-00000.out 2>/dev/null && break; sleep 0.1; done
victim=$(rank1_of pd 0)
[ -n "$victim" ] || { cat pd.out >&2; fail "rank 1 of the plain program not found"; }
kill -KILL "$victim"
for _ in $(seq 1 300); do grep -q 'resumed from step' pd/attempt-0001/rank-00000.out 2>/dev/null && break; sleep 0.1; done
expect_contains pd/attempt-0001/rank-00000.out "resumed from step"
ftl status pd >status-live.txt 2>&1 || fail "ftl status failed"
# Ctrl-C (SIGINT to ftl alone, as a terminal sends it to ftl's foreground group): one clean stop.
kill -INT $pid
wait_rc $pid
expect_rc 130 pd.out
# (The first attempt's survivor printed gloo's traceback when its peer was killed: that is the kill.)
grep -l "Traceback" pd/attempt-0001/rank-*.err && fail "Ctrl-C printed a traceback"
sed -n '/interrupted/,$p' pd.out | grep -q Traceback && fail "Ctrl-C printed a traceback"
grep -q "first failure" <(sed -n '/interrupted/,$p' pd.out) && fail "Ctrl-C was logged as a rank's failure"
[ "$(grep -c '"record":"failure"' pd/failures.jsonl)" = 1 ] || { cat pd/failures.jsonl >&2; fail "Ctrl-C was recorded as a failure"; }
expect_contains pd.out "interrupted"

ftl status pd >status.txt 2>&1 || fail "ftl status failed"
cat status.txt
expect_contains status.txt "steps not reported"
expect_contains status.txt "goodput: not measured (the program reports no steps"
expect_contains status.txt "failure detected to the ranks' start: the program reports no steps"
grep -q "step -1\|steps to -1\|R = 60 s" status.txt && fail "ftl status shows a step -1 or an assumed R"
ftl status pd --json >status.json || fail "ftl status --json failed"
/usr/bin/python3 - status.json <<'PY' || fail "bad status JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["steps_reported"] is False, d["steps_reported"]
g = d["goodput"]
assert g["measured"] is False and g["goodput_pct"] is None and g["unreported_ms"] > 0, g
assert d["restart_cost"]["measured"] is True and 0 < d["restart_cost"]["restart_s"] < 30, d["restart_cost"]
PY
run_ftl report.out report pd -o report.html
expect_rc 0 report.out
expect_contains report.html "goodput not measured (the program reports no steps)"
expect_contains report.html "running (no steps)"
grep -q "no cadence events" report.html && fail "the report draws empty cadence panels"

# The same command again resumes from the program's own checkpoint (then Ctrl-C once more).
next=$(current_attempt pd)
next=$((next + 1))
ftl run -n 2 --run-dir pd -- "${PLAIN[@]}" >pd2.out 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q 'resumed from step [1-9]' "pd/attempt-$(printf %04d $next)/rank-00000.out" 2>/dev/null && break; sleep 0.1; done
expect_contains "pd/attempt-$(printf %04d $next)/rank-00000.out" "resumed from step"
kill -INT $pid
wait_rc $pid
expect_rc 130 pd2.out

# A program that fails at once, every time, reports no steps: the crash-loop message says so.
run_ftl loop.out run -n 1 --run-dir loop --max-restarts 5 -- /usr/bin/python3 -c 'import sys; sys.exit(3)'
expect_rc 1 loop.out
expect_contains loop.out "crash loop: 3 attempts in a row failed before any step was reported"
grep -q "at step -1" loop.out && fail "the crash-loop message names step -1"
expect_no_leftovers
echo ok
