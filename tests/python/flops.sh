# tests/python/flops.sh: model FLOPs from Python (ctx.step_done(step, flops=...), python/ftl) under
# `ftl run -n 2` with a job spec's peak (mfu.peak_tflops): bad counts are refused with FtlError
# (tests/python/flops_step.py); the attempt's final `mfu` event counts exactly the FLOPs reported
# (20 steps × 3e12 × 2 ranks), steps reported without flops add nothing, and the MFU is the rate
# over the job spec's peak, said so by `ftl status` (docs/gpu.md, "Useful work: MFU").
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
export PYTHONDONTWRITEBYTECODE=1  # keep the source tree clean
cat >job.yaml <<YAML
name: pyflops
ranks: 2
program: /usr/bin/python3
args: ["$FTL_SOURCE_DIR/tests/python/flops_step.py", "20", "50", "3e12"]
restart: {max_restarts: 0}
mfu: {peak_tflops: 500}
YAML
run_ftl out run --progress off --run-dir rd job.yaml
expect_rc 0 out
for r in 0 1; do expect_contains rd/attempt-0000/rank-0000$r.out "flops ok rank $r"; done
run_ftl status.out status rd
expect_rc 0 status.out
expect_contains status.out "MFU of the job spec's peak (mfu.peak_tflops 500 per rank × 2 ranks)"
/usr/bin/python3 - rd/events.jsonl <<'PY' || fail "the FLOPs reported from Python are not what the launcher counted"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
f = [e for e in ev if e["event"] == "mfu" and e.get("final")]
assert len(f) == 1, f
f = f[0]
assert f["model_flops"] == 20 * 3e12 * 2, f
assert f["peak_source"] == "spec" and f["peak_flops"] == 2 * 500e12, f
# The rate: 3e12 a step per rank at about 20 steps a second; whatever the machine's pace, MFU is
# the rate the event says over the peak.
assert abs(f["avg_mfu"] - f["avg_model_flops_per_s"] / 1e15) < 1e-12, f
assert 0 < f["avg_mfu"] < 0.2, f
print("python flops ok:", f["model_flops"], f["avg_mfu"])
PY
echo ok
