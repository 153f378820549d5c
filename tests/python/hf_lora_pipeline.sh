# tests/python/hf_lora_pipeline.sh: examples/hf-lora as a pipeline job (docs/pipeline.md, "A PEFT
# adapter through the gate"): `ftl run` snapshots the inputs (the base as a Hugging Face folder
# exported by `ftl export --base-file`, the train and held-out lines), 2 ranks train with
# transformers + peft and rank 0 commits RUNDIR/final in PEFT's layout, the gate runs
# examples/hf-lora/eval.py (pinned: it is eval.program) and publishes and promotes to candidate.
# The version fetched with `ftl registry fetch` holds final/'s two files byte for byte and the base
# folder; tests/python/hf_load.py loads it in a fresh interpreter, offline, and its greedy exact
# match must be the verdict's to the last digit. Then bad PEFT final/s are refused by name.
. "$(dirname "$0")/hf_lib.sh" || exit 1
hf_pipeline_setup
t0=$(date +%s)
# The example's job with this test's paths and fewer steps (hf_lib.sh).
hf_pipeline_job job.yaml hflora 55 20
run_ftl run.out run --run-dir r1 job.yaml
expect_rc 0 run.out
expect_contains run.out "hashing 3 inputs"
expect_contains run.out "gate passed: exact_match"
expect_contains run.out "published hflora version"
echo "the pipeline: $(( $(date +%s) - t0 )) s"
# final/ is peft's save_pretrained output under ftl's commit marker, and the gate evaluated it.
for f in COMMIT adapter_config.json adapter_model.safetensors; do
  [ -f "r1/final/$f" ] || { ls -l r1/final >&2; fail "r1/final/$f is missing"; }
done
grep -q '"adapter_model.safetensors"' r1/final/COMMIT || fail "COMMIT does not list the weights"
expect_contains r1/gate/eval.out "held-out exact match"
value=$("$HF_PY" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["value"]))' r1/verdict.json)

run_ftl fetch.out registry fetch --registry reg-hflora hflora@candidate pkg
expect_rc 0 fetch.out
# Packaged as it is: the adapter's two files are final/'s, the base the snapshot's folder.
same_files r1/final pkg adapter_config.json adapter_model.safetensors
same_files cexp/base pkg/base config.json model.safetensors tokenizer.json tokenizer_config.json special_tokens_map.json
pkg_value=$("$HF_PY" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["value"]))' pkg/verdict.json)
[ "$pkg_value" = "$value" ] || fail "the package's verdict says $pkg_value, the run's $value"
# The way a PEFT user loads it (hf_lib.sh): AutoPeftModelForCausalLM, from another folder too.
expect_contains fetch.out "its base is in the Hugging Face cache as ftl-"
expect_auto_peft_loads pkg
run_ftl list.out registry ls --registry reg-hflora hflora
expect_rc 0 list.out
expect_contains list.out "candidate -> "

# A fresh interpreter, offline, nothing of ftl: transformers loads base/, peft the adapter.
env -u FTL_PYTHON HF_HUB_OFFLINE=1 "$HF_PY" "$FTL_SOURCE_DIR/tests/python/hf_load.py" pkg --heldout data/heldout.txt \
  --expect-exact-match "$value" >load.out 2>&1 || { cat load.out >&2; fail "hf_load.py failed on the fetched package"; }
peft_value=$("$HF_PY" -c 'import json,sys; print(repr(json.loads(open(sys.argv[1]).read().splitlines()[-1])["exact_match"]))' load.out)
echo "exact match: the gate's verdict $value, transformers + peft on the fetched package $peft_value"
[ "$peft_value" = "$value" ] || fail "peft's exact match $peft_value is not the verdict's $value"
"$HF_PY" -c 'import sys; v=float(sys.argv[1]); sys.exit(0 if 0 < v < 1 else 1)' "$value" ||
  fail "the gate's exact match ($value) is 0 or 1: the comparison would prove little"

# Bad PEFT final/s are refused by the gate, naming the file: a malformed adapter_config.json
# (committed, so only the config check can catch it), then a listed file gone.
cp -a r1/final good-final
printf '{"peft_type": "LORA", "r": 8,' >r1/final/adapter_config.json
"$HF_PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import ftl
ftl.commit_adapter(sys.argv[2], ["adapter_config.json", "adapter_model.safetensors"])' "$FTL_SOURCE_DIR/python" r1/final ||
  fail "ftl.commit_adapter failed"
run_ftl gate-bad.out gate r1
expect_rc 2 gate-bad.out
expect_contains gate-bad.out "r1/final/adapter_config.json is not valid JSON"
[ ! -e r1/verdict.json ] || fail "a refused adapter left a verdict"
printf '{"peft_type": "LORA", "r": "8", "lora_alpha": 16, "target_modules": ["q_proj"]}' >r1/final/adapter_config.json
"$HF_PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import ftl
ftl.commit_adapter(sys.argv[2], ["adapter_config.json", "adapter_model.safetensors"])' "$FTL_SOURCE_DIR/python" r1/final
run_ftl gate-bad2.out gate r1
expect_rc 2 gate-bad2.out
expect_contains gate-bad2.out "adapter_config.json: 'r' is not an integer >= 1"
rm -rf r1/final && cp -a good-final r1/final && rm r1/final/adapter_model.safetensors
run_ftl gate-missing.out gate r1
expect_rc 2 gate-missing.out
expect_contains gate-missing.out "r1/final/adapter_model.safetensors is missing"
# The good adapter again: the same verdict value.
rm -rf r1/final && cp -a good-final r1/final
run_ftl gate-again.out gate r1
expect_rc 0 gate-again.out
again=$("$HF_PY" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["value"]))' r1/verdict.json)
[ "$again" = "$value" ] || fail "the gate's figure changed on the same adapter: $value, then $again"
echo "ok ($(( $(date +%s) - t0 )) s)"
