# tests/python/hf_trainer_kill.sh: examples/hf-trainer (transformers' Trainer + peft under
# ftl.hf.train) through the pipeline, then killed. The reference (hf_trainer_lib.sh, made once per
# build) is the example's job end to end: snapshot, 2 ranks train, the gate (examples/hf-lora/eval.py)
# passes, the adapter is published and promoted; checked here. Then the same training with a random
# rank SIGKILLed after a commit and no standby (a cold restart): ftl restores its newest committed
# step, Trainer resumes from it through its own resume path, and RUNDIR/final is byte-identical to
# the reference's.
. "$(dirname "$0")/hf_trainer_lib.sh" || exit 1
R=refrun/ref
expect_contains refrun/ref.out "gate passed: exact_match"
expect_contains refrun/ref.out "published ht version"
expect_contains refrun/ref.out "hashing 3 inputs"
expect_one_attempt $R refrun/ref.out
expect_contains $R/attempt-0000/rank-00000.out "done: 60 steps"
# Each optimizer step's model FLOPs reached the launcher without a line in the script (ftl.hf.train
# counts them per micro-batch with ftl.hf.train_flops, checked by hand in train_flops.sh): the
# attempt's final mfu event counts them for both ranks, and the run's last line says the MFU.
expect_contains refrun/ref.out "× MFU"
/usr/bin/python3 - $R/events.jsonl <<'PY' || fail "the Trainer's steps reported no model FLOPs"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
final = [e for e in ev if e["event"] == "mfu" and e.get("final")]
assert final and final[-1]["ranks"] == 2 and final[-1]["model_flops"] > 0, final
PY
grep -q '"adapter_model.safetensors"' $R/final/COMMIT || fail "COMMIT does not list the weights"
run_ftl ls.out registry ls --registry refrun/reg-ht ht
expect_rc 0 ls.out
expect_contains ls.out "candidate -> "
# ftl's own reader takes final/ as a committed PEFT adapter; Trainer's own saves were off (ftl's
# replaced them), so its output_dir holds no checkpoint-N.
run_ftl export.out export $R -o ref-export
expect_rc 0 export.out
same_files $R/final ref-export adapter_model.safetensors adapter_config.json
! ls -d $R/trainer/checkpoint-* 2>/dev/null || fail "Trainer wrote its own checkpoints under ftl"

[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
KILL_RANK=$((RANDOM % 2))
t1=$(date +%s%N)
export PYTHONHASHSEED=2 # not the reference's: the adapter's bytes must not follow it
ftl run -n 2 --no-standby --max-restarts 2 --run-dir victim -- "$HF_PY" "$HT_TRAIN" "${HT_ARGS[@]}" --step-ms 60 >out 2>&1 &
FTL_PID=$!
wait_for_commit victim out
pid=$(rank_pid victim "$HT_TRAIN" "$KILL_RANK")
[ -n "$pid" ] || { cat out >&2; fail "rank $KILL_RANK's process not found"; }
kill -KILL "$pid"
echo "killed rank $KILL_RANK (pid $pid); committed then:" $(ls -d victim/checkpoints/step-*/manifest.json 2>/dev/null | cut -d/ -f3)
wait_rc $FTL_PID
expect_rc 0 out
[ -d victim/attempt-0001 ] || { cat out >&2; fail "no second attempt (the kill landed after the end?)"; }
expect_contains victim/attempt-0001/rank-00000.out "resumed from ftl checkpoint"
grep -o "resumed from ftl checkpoint [0-9]*" victim/attempt-0001/rank-00000.out
echo "killed and resumed run: $(( ($(date +%s%N) - t1) / 1000000 )) ms"
same_files $R/final victim/final "${HT_FILES[@]}"
[ ! -e victim/trainer-resume ] || fail "the Trainer checkpoint folder made for the resume was left behind"
expect_no_leftovers
echo ok
