# tests/finetune/lib.sh: shared set-up of the fine-tune's script tests: the launcher tests'
# helpers (scratch folder, PATH, run_ftl, expect_*), a small data set and the small
# configuration every run uses (a base model of 1 layer and 32 channels pre-trained in a few
# steps, an adapter of rank 4 trained for a few dozen steps of 8 examples on 4 ranks).
. "$FTL_SOURCE_DIR/tests/launcher/lib.sh" || exit 1
# No FTL_BACKEND: the example's host gradients go through MPI whichever backend ftl_init chooses
# (docs/gpu.md), so these tests also run the automatic choice on a GPU machine.
ftl-finetune-data --out data --pretrain 512 --train 512 --heldout 64 >/dev/null || fail "ftl-finetune-data failed"
FT_STEPS=${FT_STEPS:-40}
FT_ARGS=(--data data --base data/base.h5 --pretrain-steps "${FT_PRETRAIN_STEPS:-10}" --pretrain-batch 8 --layers 1 --embd 32 --heads 2
         --steps "$FT_STEPS" --batch 8 --rank 4 --alpha 8 --lr 1e-2 --log-every 1 --marker "$MARKER")
# Builds the shared base model once (1 rank), so every run below only loads it.
ftl run -n 1 --run-dir base-run -- ftl-finetune "${FT_ARGS[@]}" --steps 0 >base.out 2>&1 ||
  { cat base.out >&2; fail "building the base model failed"; }

# same_adapter DIR1 DIR2: both adapters byte-identical.
same_adapter() {
  for f in adapter.safetensors adapter.json; do
    [ -f "$1/$f" ] || fail "$1/$f is missing"
    cmp "$1/$f" "$2/$f" || fail "$1/$f and $2/$f differ"
  done
}
