# tests/python/hf_lib.sh: shared by the Hugging Face tests (hf_*.sh): the interpreter with the
# pinned transformers/peft stack ($FTL_PYTHON, set by tests/python/CMakeLists.txt to the venv of
# scripts/setup-python.sh), offline settings, and the skip rule: 77 only when the venv is
# genuinely missing, and not even then under CI=true (CI runs scripts/test.sh, which makes it).
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
HF_PY=${FTL_PYTHON:-/usr/bin/python3}
HF_VENV=${FTL_VENV:-$FTL_SOURCE_DIR/.venv}
# Found, not imported: an import of torch and transformers costs seconds of CPU, and every test
# imports them itself (a broken install fails there, loudly); scripts/setup-python.sh imported them
# all once when it made the venv.
if ! "$HF_PY" -c 'import importlib.util as u, sys
missing = [m for m in ("torch", "transformers", "peft", "safetensors") if u.find_spec(m) is None]
sys.exit("not found: " + ", ".join(missing) if missing else 0)' 2>hf_import.err; then
  if [ ! -x "$HF_VENV/bin/python" ] && [ "${CI:-}" != true ]; then
    echo "SKIP: no venv at $HF_VENV (run scripts/setup-python.sh, then configure again)"
    exit 77
  fi
  cat hf_import.err >&2
  [ -x "$HF_VENV/bin/python" ] &&
    fail "$HF_PY does not have the Hugging Face stack although $HF_VENV exists (configure again, or rerun scripts/setup-python.sh)"
  fail "CI=true and no venv at $HF_VENV: scripts/setup-python.sh must have made it"
fi
# Nothing comes from a model hub: every model is built from a config in code or read from a folder.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export HF_HOME=$SCRATCH/hf-home # no cache of the machine's is read or written
export FTL_BACKEND=mpi OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
HF_TRAIN=$FTL_SOURCE_DIR/examples/hf-lora/train.py

# same_files A B FILES...: each file byte-identical in the two folders.
same_files() {
  local a=$1 b=$2 f
  shift 2
  for f in "$@"; do
    [ -f "$a/$f" ] || fail "$a/$f is missing"
    cmp -s "$a/$f" "$b/$f" || fail "$a/$f and $b/$f differ"
  done
}

# hf_pipeline_setup: examples/hf-lora as a pipeline job needs the small C base (tests/finetune/lib.sh:
# 1 layer, 32 channels, pre-trained 300 steps to copy words) as a Hugging Face folder, made the way
# a user makes one (`ftl export --base-file` of a C run): data/ and cexp/base here, made once per
# build (cached).
hf_pipeline_setup() {
  FT_PRETRAIN_STEPS=300
  . "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
  cached "hf base export; $FT_DATA_KEY; $(bin_key ftl)" cexp hf_export_base || fail "exporting the base failed"
}
hf_export_base() {
  cp -a "$SCRATCH/data" data || return 1
  ftl run -n 1 --run-dir c0 -- ftl-finetune "${FT_ARGS[@]}" --steps 1 >c0.out 2>&1 || { cat c0.out >&2; return 1; }
  ftl export c0 --base-file data/base.h5 -o out >export.out 2>&1 || { cat export.out >&2; return 1; }
  [ -f out/base/config.json ] || { echo "ftl export wrote no base folder" >&2; return 1; }
  mv out/base base && rm -rf c0 data out c0.out export.out
}

# hf_pipeline_job FILE NAME STEPS CKPT_EVERY [ENV]: examples/hf-lora's job (examples/hf-lora/job.yaml)
# with this test's paths, STEPS steps and a threshold a short run clears (55 steps get 39 of the 64
# held-out lines, 0.609375), its registry reg-NAME and channel candidate; ENV: more of the ranks'
# environment as YAML flow entries.
hf_pipeline_job() {
  local file=$1 name=$2 steps=$3 every=$4 env=${5:-}
  {
    echo "name: $name"
    echo "ranks: 2"
    echo "program: $HF_PY"
    echo "args: [\"$HF_TRAIN\", \"--base\", \"cexp/base\", \"--data\", \"data/train.txt\", \"--steps\", \"$steps\","
    echo "       \"--ckpt-every\", \"$every\", \"--targets\", \"q_proj,v_proj,o_proj,gate_proj,up_proj\", \"--lr\", \"1e-2\"]"
    echo "env: {${env:+$env, }OMP_NUM_THREADS: \"1\", FTL_BACKEND: mpi, FTL_LOG_LEVEL: warn, HF_HUB_OFFLINE: \"1\", TRANSFORMERS_OFFLINE: \"1\"}"
    echo "rendezvous: {timeout_s: 60}"
    echo "inputs:"
    echo "  train: data/train.txt"
    echo "  heldout: data/heldout.txt"
    echo "  base: cexp/base"
    echo "eval:"
    echo "  program: $FTL_SOURCE_DIR/examples/hf-lora/eval.py"
    echo "  args: [\"--base\", \"{base}\", \"--adapter\", \"{adapter}\", \"--data\", \"{data}\", \"--metrics\", \"{metrics}\"]"
    echo "  data: heldout"
    echo "  base: base"
    echo "  metric: exact_match"
    echo "  direction: higher"
    echo "  threshold: 0.5"
    echo "  timeout_s: 120"
    echo "  env: {OMP_NUM_THREADS: \"1\", FTL_PYTHON: \"$HF_PY\"}"
    echo "registry:"
    echo "  path: reg-$name"
    echo "  channel: candidate"
  } >"$file"
}

# expect_auto_peft_loads PKG: a fetched version (PKG, relative to the scratch folder) loads the way
# a PEFT user loads an adapter, AutoPeftModelForCausalLM on the folder, which names its base by
# content (not the training tree's path), fetch having put base/ in the Hugging Face cache under
# that name (tests/python/auto_peft_load.py): from an empty folder elsewhere, and from here.
expect_auto_peft_loads() {
  local pkg=$SCRATCH/$1 elsewhere
  elsewhere=$(mktemp -d "${TMPDIR:-/tmp}/ftl-elsewhere.XXXXXX")
  (cd "$elsewhere" && HF_HUB_OFFLINE=1 "$HF_PY" "$FTL_SOURCE_DIR/tests/python/auto_peft_load.py" "$pkg") >auto.out 2>&1 ||
    { rm -rf "$elsewhere"; cat auto.out >&2; fail "AutoPeftModelForCausalLM did not load the fetched version from another folder"; }
  rm -rf "$elsewhere"
  tail -1 auto.out
  HF_HUB_OFFLINE=1 "$HF_PY" "$FTL_SOURCE_DIR/tests/python/auto_peft_load.py" "$pkg" >auto-here.out 2>&1 ||
    { cat auto-here.out >&2; fail "AutoPeftModelForCausalLM did not load the fetched version from the scratch folder"; }
}
