# tests/launcher/gpu_health_run.sh: GPU health in `ftl run`, through the fake NVML (FTL_NVML_FAKE,
# docs/formats/nvml-fake.md; no GPU here). Each host's first rank agent checks its GPUs before the
# rank starts and every FTL_GPU_HEALTH_MS (here 200 ms), and says when a verdict changes:
#  1. a GPU that starts thermal-throttling mid-run: a gpu_health event says degraded, with the
#     reason; the launcher logs it; the job is not stopped for it and ends 0 (its ranks wait for the
#     test to have seen the verdict); ftl status names it;
#  2. a GPU whose uncorrectable ECC count rises mid-run: failed; the attempt ends at once with cause
#     gpu_failed, naming the rank, host, GPU and reason, in the failure ledger too;
#  3. a GPU already failed before the rank starts (a row-remap failure) ends the first attempt;
#  4. no NVML (the fake says it is missing): nothing is said, the job runs as before.
. "$(dirname "$0")/lib.sh" || exit 1
export FTL_GPU_HEALTH_MS=200

cat >degraded.json <<'JSON'
{"version": 1, "devices": [{"readings": [
  {"uuid": "GPU-aaaa", "name": "NVIDIA H100 80GB HBM3", "temperature_c": 60},
  {}, {},
  {"throttle": ["hw_thermal"], "temperature_c": 92}
]}]}
JSON
# The ranks run until the test has seen the verdict (the job outlasts the event, however slow the
# machine), then end 0.
FTL_NVML_FAKE=$PWD/degraded.json ftl run -n 2 --max-restarts 0 --run-dir deg -- \
  sh -c "while [ ! -e '$SCRATCH/go' ]; do sleep 0.05; done # $MARKER" >deg.out 2>&1 &
pid=$!
degraded_seen() { grep '"event":"gpu_health"' deg/events.jsonl 2>/dev/null | grep -q '"verdict":"degraded".*thermal'; }
wait_until 30 "no thermal-throttling verdict in deg/events.jsonl" degraded_seen
touch go
wait_rc $pid
expect_rc 0 deg.out
grep '"event":"gpu_health"' deg/events.jsonl | grep -q '"verdict":"degraded".*thermal' ||
  { cat deg/events.jsonl >&2; fail "no degraded verdict for the thermal throttling"; }
grep '"event":"gpu_health"' deg/events.jsonl | head -1 | grep -q '"verdict":"healthy"' || fail "the first check was not logged healthy"
expect_contains deg.out "GPU 0 (GPU-aaaa) on host"
expect_contains deg.out "is degraded"
# ftl status names the GPU that is not healthy, with why (docs/formats/status.md: gpus).
run_ftl status.out status deg
expect_contains status.out "gpu health: 1 of 1 GPU not healthy"
expect_contains status.out "GPU 0 (GPU-aaaa): degraded: "

cat >failing.json <<'JSON'
{"version": 1, "devices": [{"readings": [
  {"uuid": "GPU-bbbb"}, {}, {},
  {"ecc": {"uncorrected_volatile": 1, "uncorrected_aggregate": 1}}
]}]}
JSON
FTL_NVML_FAKE=$PWD/failing.json run_ftl fail.out run -n 2 --max-restarts 0 --run-dir fail -- sleep 30
expect_rc 1 fail.out
expect_contains fail.out "fail its health check"
grep -q '"event":"failure".*"cause":"gpu_failed"' fail/events.jsonl || fail "the failure's cause is not gpu_failed"
grep -q '"cause":"gpu_failed"' fail/failures.jsonl || fail "the failure ledger does not say gpu_failed"
grep -q '"event":"attempt_end".*"duration_ms"' fail/events.jsonl || fail "no attempt_end"
dur=$(grep '"event":"attempt_end"' fail/events.jsonl | sed 's/.*"duration_ms":\([0-9.]*\).*/\1/' | cut -d. -f1)
[ "$dur" -lt 20000 ] || fail "the attempt was not ended on the failed GPU (it ran $dur ms)"

cat >before.json <<'JSON'
{"version": 1, "devices": [{"readings": [{"uuid": "GPU-cccc", "remapped_rows": {"failure": true}}]}]}
JSON
FTL_NVML_FAKE=$PWD/before.json run_ftl before.out run -n 1 --max-restarts 0 --run-dir before -- sleep 30
expect_rc 1 before.out
grep -q '"cause":"gpu_failed"' before/failures.jsonl || fail "a GPU failed before the start did not end the attempt"

echo '{"version": 1, "missing": true}' >missing.json
FTL_NVML_FAKE=$PWD/missing.json run_ftl missing.out run -n 2 --max-restarts 0 --run-dir missing -- sleep 1
expect_rc 0 missing.out
! grep -q '"event":"gpu_health"' missing/events.jsonl || fail "gpu_health said without NVML"
expect_no_leftovers
echo ok
