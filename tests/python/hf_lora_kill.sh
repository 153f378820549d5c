# tests/python/hf_lora_kill.sh: examples/hf-lora (transformers' LlamaForCausalLM + peft's LoRA,
# checkpointed through ftl.hf) with a random rank SIGKILLed after the first committed checkpoint:
# a real `ftl run` restarts the gang, the ranks restore the LoRA tensors, AdamW's state, the RNGs
# and the data position, and peft's save_pretrained output in RUNDIR/final (with ftl's commit
# marker over it) is byte-identical to an unbroken run's.
. "$(dirname "$0")/hf_lib.sh" || exit 1
ARGS=(--steps 40 --ckpt-every 5)
FILES=(adapter_model.safetensors adapter_config.json README.md COMMIT)
# Different string-hash seeds for the two runs: peft keeps target_modules as a set, whose order
# follows the seed; the adapter's bytes must not (ftl.hf.export_adapter writes them sorted).
t0=$(date +%s%N)
export PYTHONHASHSEED=1
run_ftl ref.out run -n 2 --no-standby --run-dir ref -- "$HF_PY" "$HF_TRAIN" "${ARGS[@]}"
expect_rc 0 ref.out
expect_one_attempt ref ref.out
expect_contains ref/attempt-0000/rank-00000.out "done: 40 steps"
echo "unbroken run: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
# What peft wrote: its names for the 2 layers' q_proj and v_proj, and trained (B not all zero).
"$HF_PY" - ref/final <<'PY' || fail "ref/final is not the PEFT adapter expected"
import json, sys
from safetensors.torch import load_file
t = load_file(sys.argv[1] + "/adapter_model.safetensors")
want = {f"base_model.model.model.layers.{i}.self_attn.{m}.lora_{ab}.weight"
        for i in range(2) for m in ("q_proj", "v_proj") for ab in "AB"}
assert set(t) == want, sorted(t)
assert all(t[n].abs().sum() > 0 for n in t if ".lora_B." in n), "a lora_B is all zero"
cfg = json.load(open(sys.argv[1] + "/adapter_config.json"))
assert cfg["peft_type"] == "LORA" and sorted(cfg["target_modules"]) == ["q_proj", "v_proj"], cfg
PY
# ftl's own reader takes it as a committed PEFT final/ (pipeline/peft_final.c): marker, files, config.
run_ftl export.out export ref -o ref-export
expect_rc 0 export.out
same_files ref/final ref-export adapter_model.safetensors adapter_config.json

[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
KILL_RANK=$((RANDOM % 2))
t1=$(date +%s%N)
export PYTHONHASHSEED=2
ftl run -n 2 --max-restarts 2 --run-dir victim -- "$HF_PY" "$HF_TRAIN" "${ARGS[@]}" --step-ms 60 >out 2>&1 &
FTL_PID=$!
for _ in $(seq 1200); do
  has_commit victim && break
  sleep 0.05
done
has_commit victim || { cat out >&2; fail "no committed checkpoint after 60 s"; }
pid=$(rank_pid victim "$HF_TRAIN" "$KILL_RANK") # the running attempt's, not the standby's
[ -n "$pid" ] || { cat out >&2; fail "rank $KILL_RANK's process not found"; }
kill -KILL "$pid"
echo "killed rank $KILL_RANK (pid $pid); committed then:" $(ls -d victim/checkpoints/step-*/manifest.json 2>/dev/null | cut -d/ -f3)
wait_rc $FTL_PID
expect_rc 0 out
[ -d victim/attempt-0001 ] || fail "no second attempt"
expect_contains victim/attempt-0001/rank-00000.out "resumed from step"
grep -o "resumed from step [0-9]* at data position [0-9]*" victim/attempt-0001/rank-00000.out
echo "killed and resumed run: $(( ($(date +%s%N) - t1) / 1000000 )) ms"
same_files ref/final victim/final "${FILES[@]}"
expect_no_leftovers
echo ok
