# tests/python/hf_trainer_lib.sh: shared by the tests of examples/hf-trainer (transformers' Trainer
# under ftl.hf.train): the example's settings on the C example's small base (hf_lib.sh's
# hf_pipeline_setup: cexp/base, data/), and one unbroken reference run made once per build (cached):
# the example through the whole pipeline (snapshot, train, gate with examples/hf-lora/eval.py,
# publish, promote), whose committed RUNDIR/final every killed, standby and preempted run must end
# with byte for byte.
. "$(dirname "$0")/hf_lib.sh" || exit 1
hf_pipeline_setup
HT_TRAIN=$FTL_SOURCE_DIR/examples/hf-trainer/train.py
# 512 train lines, 16 a step: 32 steps an epoch, so a run of 60 crosses an epoch (the sampler's
# reshuffle) and a kill lands in either. Dropout on: the restored generators matter.
HT_ARGS=(--base cexp/base --data data/train.txt --steps 60 --batch 16 --ckpt-every 5 --scheduler constant
         --targets q_proj,v_proj,o_proj,gate_proj,up_proj --lr 1e-2 --dropout 0.05)
HT_FILES=(adapter_model.safetensors adapter_config.json README.md COMMIT)

# ht_job FILE: the example's job (examples/hf-trainer/job.yaml) with this test's paths and
# settings, a threshold a 60-step run clears, and its registry reg-ht.
ht_job() {
  {
    echo "name: ht"
    echo "ranks: 2"
    echo "program: $HF_PY"
    printf 'args: %s\n' "$(yaml_list "$HT_TRAIN" "${HT_ARGS[@]}")"
    echo "env: {OMP_NUM_THREADS: \"1\", FTL_BACKEND: mpi, FTL_LOG_LEVEL: warn, HF_HUB_OFFLINE: \"1\", TRANSFORMERS_OFFLINE: \"1\"}"
    echo "rendezvous: {timeout_s: 60}"
    echo "restart: {standby: off}"
    echo "inputs: {train: data/train.txt, heldout: data/heldout.txt, base: cexp/base}"
    echo "eval:"
    echo "  program: $FTL_SOURCE_DIR/examples/hf-lora/eval.py"
    echo "  args: [\"--base\", \"{base}\", \"--adapter\", \"{adapter}\", \"--data\", \"{data}\", \"--metrics\", \"{metrics}\"]"
    echo "  data: heldout"
    echo "  base: base"
    echo "  metric: exact_match"
    echo "  direction: higher"
    echo "  threshold: $HT_THRESHOLD"
    echo "  timeout_s: 120"
    echo "  env: {OMP_NUM_THREADS: \"1\", FTL_PYTHON: \"$HF_PY\"}"
    echo "registry: {path: reg-ht, channel: candidate}"
  } >"$1"
}
HT_THRESHOLD=0.3

# The reference: made in an empty folder by `cached`, from this test's cexp/ and data/.
ht_reference_run() {
  ln -s "$SCRATCH/cexp" cexp && ln -s "$SCRATCH/data" data || return 1
  ht_job job.yaml
  ftl run --run-dir ref job.yaml >ref.out 2>&1
  local rc=$?
  rm -f cexp data
  [ $rc -eq 0 ] || { cat ref.out >&2; echo "the reference pipeline run exited $rc" >&2; return 1; }
}
HT_KEY="hf-trainer reference; ${HT_ARGS[*]}; $HT_THRESHOLD; $FT_DATA_KEY; $(bin_key ftl)
$(cat "$HT_TRAIN" "$FTL_SOURCE_DIR"/python/ftl/*.py "$FTL_SOURCE_DIR/examples/hf-lora/eval.py" | sha256sum)"
cached "$HT_KEY" refrun ht_reference_run || fail "the reference run failed"
