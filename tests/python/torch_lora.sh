# tests/python/torch_lora.sh: examples/torch-lora end to end through its own job spec (2 ranks):
# trains, commits checkpoints through the Python binding, writes a valid PEFT adapter; then the
# same job preempted (SIGTERM to `ftl run`) commits a checkpoint and exits 75, and resumed it ends
# with the same adapter bytes. Its reported model FLOPs are its model's (a count written here).
. "$(dirname "$0")/torch_lib.sh" || exit 1
run_ftl out run --run-dir rd "$FTL_SOURCE_DIR/examples/torch-lora/job.yaml"
expect_rc 0 out
expect_one_attempt rd out
expect_contains rd/attempt-0000/rank-00000.out "done: 120 steps"
check_peft rd/export
has_commit rd || fail "no committed checkpoint"
# Its model FLOPs (ctx.step_done(step, flops=...)): by the example's rule, 4 per frozen base weight and
# 6 per LoRA weight for each row; the job's defaults are 2 blocks of 32 -> 64 -> 32, LoRA rank 4 on
# both linears, 32 rows a step over the gang: the attempt's final mfu event counts 120 such steps.
/usr/bin/python3 - rd/events.jsonl <<'PY' || fail "torch-lora's FLOPs are not its model's"
import json, sys
dim, layers, r, rows, steps = 32, 2, 4, 32, 120
base = layers * (dim * 2 * dim + 2 * dim * dim)
lora = layers * (r * (dim + 2 * dim) + r * (2 * dim + dim))
want = steps * rows * (4 * base + 6 * lora)
f = [json.loads(l) for l in open(sys.argv[1]) if '"event":"mfu"' in l and '"final":true' in l]
assert len(f) == 1 and f[0]["model_flops"] == want, (f, want)
PY

# Preemption: SIGTERM once a checkpoint is committed; the job saves, commits, and asks for a requeue.
ftl run -n 2 --run-dir pre -- "$TL_TRAIN" --steps 120 --ckpt-every 10 --step-ms 40 >pre.out 2>&1 &
pid=$!
for _ in $(seq 600); do
  has_commit pre && break
  sleep 0.05
done
kill -TERM $pid
wait_rc $pid
expect_rc 75 pre.out
expect_contains pre/attempt-0000/rank-00000.out "stop requested; checkpoint"
run_ftl pre2.out run -n 2 --run-dir pre -- "$TL_TRAIN" --steps 120 --ckpt-every 10 --step-ms 40 # the same job
expect_rc 0 pre2.out
grep -rq "resumed from step" pre/attempt-*/rank-00000.out || fail "the requeued job did not resume"
same_adapter rd/export pre/export
expect_no_leftovers
echo ok
