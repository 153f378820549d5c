# Variables and logs: a library program sees RANK/WORLD_SIZE/LOCAL_* equal to what ftl_init
# found, and a plain shell program (no library) gets the same variables; per-rank output goes to
# the attempt's folder, and a second run of the same run directory is attempt 1.
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out run -n 3 --run-dir run -- gang_probe --check-env --marker "$MARKER"
expect_rc 0 out
[ "$(grep -c -- '-> ok' out)" -eq 3 ] || { cat out; fail "expected 3 ranks with matching variables"; }
for r in 0 1 2; do
  expect_contains run/attempt-0000/rank-0000$r.out "env rank=$r world=3"
  expect_contains run/attempt-0000/rank-0000$r.exit.json '"exit_code": 0'
done

# A program that never links ftl: same variables, same logs (a run directory of its own: another
# job; attempt numbers that go on across runs of one job: terminal_signals).
run_ftl out2 run -n 2 --run-dir plain -- /bin/sh -c 'echo "plain rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT run=$FTL_RUN_DIR"'
expect_rc 0 out2
expect_contains plain/attempt-0000/rank-00001.out "plain rank=1 world=2 local=1/2 master=127.0.0.1:"
expect_contains plain/attempt-0000/rank-00000.out "run=$SCRATCH/plain"
expect_contains out2 "[rank 0] plain rank=0"
expect_no_leftovers
echo "ok"
