# A straggler: one rank computes 3x longer per step. Its step rate is the others' (they wait for it
# in the allreduce), so it is found by compute time per step; ftl reports it. On one host there is
# nothing to exclude, so the warning says so and never calls the host suspect.
# The job runs until the straggler event is in the run's event log (then the test touches the
# probe's --until-file): the detector needs a full window of compute reports from every rank, about
# 4 s of this job, and a job of a fixed length would end before it on a slow machine.
# No NVML (the fake says it is missing, as on a host without a driver): the warning says nothing of
# a GPU (tests/fault/straggler_gpu_health.sh has the GPU's verdict beside it).
. "$(dirname "$0")/lib.sh" || exit 1
echo '{"version": 1, "missing": true}' >nonvml.json
FTL_NVML_FAKE=$PWD/nonvml.json ftl run -n 3 --run-dir run -- fault_probe --steps 1000 --step-ms 40 --slow-rank 2 --slow-ms 80 --save-every 0 \
  --until-file "$SCRATCH/seen" --marker "$MARKER" >out 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q '"event":"straggler"' run/events.jsonl 2>/dev/null && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
touch "$SCRATCH/seen"
wait_rc $pid
expect_rc 0 out
expect_contains out "probe: $SCRATCH/seen is there"
expect_contains out "straggler: rank 2 on host $(hostname -s) is "
expect_contains out "× slower than the others ("
if grep -q "its GPU" out; then cat out >&2; fail "a GPU was named without NVML"; fi
grep '"event":"straggler"' run/events.jsonl | grep -q '"gpu"' && fail "the straggler event names a GPU without NVML"
expect_contains out "with one host there is nothing to exclude"
# One host: nothing to exclude, so nothing is called suspect.
if grep -q suspect out; then cat out >&2; fail "a single-host run called its host suspect"; fi
grep '"event":"straggler"' run/events.jsonl | grep -q '"host_suspect":false' || fail "straggler event marks the host suspect"
grep '"event":"straggler"' run/events.jsonl | grep -q '"rank":2' || fail "no straggler event for rank 2"
[ "$(grep -c '"event":"straggler"' run/events.jsonl)" -eq 1 ] || fail "only rank 2 is a straggler"
echo "ok"
