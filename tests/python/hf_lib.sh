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
