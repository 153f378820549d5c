# tests/python/torch_lib.sh: shared by the tests of examples/torch-lora: skips without python3-torch,
# and names the example, its small settings and an adapter check.
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "SKIP: python3-torch is not installed"; exit 77; }
TL_TRAIN=$FTL_SOURCE_DIR/examples/torch-lora/train.py
TL_ARGS=(--steps 60 --ckpt-every 10)
export FTL_BACKEND=mpi OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1

# check_peft DIR: DIR holds a PEFT adapter as the pipeline reads it (tests/python/check_peft.py).
check_peft() {
  /usr/bin/python3 "$FTL_SOURCE_DIR/tests/python/check_peft.py" "$1" >check_peft.out 2>&1 ||
    { cat check_peft.out >&2; fail "$1 is not a valid PEFT adapter"; }
}

# same_adapter A B: the two PEFT exports are byte-identical.
same_adapter() {
  for f in adapter_model.safetensors adapter_config.json; do
    cmp -s "$1/$f" "$2/$f" || fail "$1/$f and $2/$f differ"
  done
}
