# A straggler: one rank computes 3x longer per step. Its step rate is the others' (they wait for it
# in the allreduce), so it is found by compute time per step; ftl reports it. On one host there is
# nothing to exclude, so the warning says so and never calls the host suspect.
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out run -n 3 --run-dir run -- fault_probe --steps 40 --step-ms 40 --slow-rank 2 --slow-ms 80 --save-every 0 --marker "$MARKER"
expect_rc 0 out
expect_contains out "straggler: rank 2 on host $(hostname -s) is slower than the others"
expect_contains out "with one host there is nothing to exclude"
# One host: nothing to exclude, so nothing is called suspect.
if grep -q suspect out; then cat out >&2; fail "a single-host run called its host suspect"; fi
grep '"event":"straggler"' run/events.jsonl | grep -q '"host_suspect":false' || fail "straggler event marks the host suspect"
grep '"event":"straggler"' run/events.jsonl | grep -q '"rank":2' || fail "no straggler event for rank 2"
[ "$(grep -c '"event":"straggler"' run/events.jsonl)" -eq 1 ] || fail "only rank 2 is a straggler"
echo "ok"
