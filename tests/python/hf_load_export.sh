# tests/python/hf_load_export.sh: the real path from a gated run to a Hugging Face load. The small
# fine-tune (tests/eval/lib.sh) runs through `ftl run` with the example's evaluator as the gate and a
# registry; the published version is fetched with `ftl registry fetch`, and tests/python/hf_load.py
# loads the fetched folder with transformers and peft offline: the base from base/, the tokenizer,
# the adapter; the held-out exact match equal to the packaged verdict.json's `value` to the last
# digit; the model from config.json alone; the merged model's logits against
# `ftl-finetune-eval --dump-logits` within 1e-4.
. "$(dirname "$0")/hf_lib.sh" || exit 1
# A base pre-trained for 300 steps and 60 steps of fine-tuning: about two thirds of the held-out
# set exact (a second each on 2 cores), so the figure compared below holds right and wrong answers.
FT_PRETRAIN_STEPS=300
. "$FTL_SOURCE_DIR/tests/eval/lib.sh" || exit 1

# A threshold of 0: this test is about what is published, not whether this small run is good.
write_job job.yaml hfl "$EXAMPLE_EVAL
metric: exact_match
direction: higher
threshold: 0" 'path: reg
channel: candidate'
run_ftl run.out run --run-dir r1 job.yaml
expect_rc 0 run.out
expect_contains run.out "published hfl version"
run_ftl fetch.out registry fetch --registry reg hfl@candidate pkg
expect_rc 0 fetch.out
[ -f pkg/base/config.json ] || { ls -R pkg >&2; fail "the fetched package has no base/"; }
# The way a PEFT user loads it (hf_lib.sh): AutoPeftModelForCausalLM, from another folder too.
expect_contains fetch.out "its base is in the Hugging Face cache as ftl-"
expect_auto_peft_loads pkg
# The package's verdict is the run's with its clock readings left out (docs/formats/package.md):
# the same metric and value.
value=$("$HF_PY" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["value"]))' pkg/verdict.json)
run_value=$("$HF_PY" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["value"]))' r1/verdict.json)
[ "$value" = "$run_value" ] || fail "the package's verdict says $value, the run's $run_value"

# The C model's logits on a held-out line (the line and its newline after '\n', as data.c feeds it).
{ printf '\n'; head -1 data/heldout.txt; } >logits-input.bin
ftl-finetune-eval --base data/base.h5 --adapter r1/final --dump-logits logits.bin --text "$(cat logits-input.bin)" \
  >dump.out 2>&1 || { cat dump.out >&2; fail "ftl-finetune-eval --dump-logits failed"; }
# --text takes the bytes as one argument; the shell's $(...) drops trailing newlines, so the input
# file is what was passed: the dump's length tells whether the two agree.
printf '%s' "$(cat logits-input.bin)" >logits-input.bin
"$HF_PY" "$FTL_SOURCE_DIR/tests/python/hf_load.py" pkg --heldout data/heldout.txt --expect-exact-match "$value" \
  --logits-input logits-input.bin --logits-dump logits.bin >load.out 2>&1 ||
  { cat load.out >&2; fail "hf_load.py failed on the fetched package"; }
tail -1 load.out
# A figure of 0 or 1 would agree with almost any decoder: this one must be strictly between.
"$HF_PY" -c 'import json,sys; v=json.load(open(sys.argv[1]))["value"]; sys.exit(0 if 0 < v < 1 else 1)' pkg/verdict.json ||
  fail "the gate's exact match ($value) is 0 or 1: the comparison would prove little"
echo ok
