# tests/finetune/lib.sh: shared set-up of the fine-tune's script tests: the launcher tests'
# helpers (scratch folder, PATH, run_ftl, expect_*), a small data set and the small
# configuration every run uses (a base model of 1 layer and 32 channels pre-trained in a few
# steps, an adapter of rank 4 trained for a few dozen steps of 8 examples on 4 ranks).
. "$FTL_SOURCE_DIR/tests/launcher/lib.sh" || exit 1
# No FTL_BACKEND: the example's host gradients go through MPI whichever backend ftl_init chooses
# (docs/gpu.md), so these tests also run the automatic choice on a GPU machine.
FT_STEPS=${FT_STEPS:-40}
FT_MODEL=(--pretrain-steps "${FT_PRETRAIN_STEPS:-10}" --pretrain-batch 8 --layers 1 --embd 32 --heads 2)
FT_ARGS=(--data data --base data/base.h5 "${FT_MODEL[@]}"
         --steps "$FT_STEPS" --batch 8 --rank 4 --alpha 8 --lr 1e-2 --log-every 1 --marker "$MARKER")
FT_DATA_ARGS=(--pretrain 512 --train 512 --heldout 64)
# ft_make_data: the data set and the base model pre-trained from it (1 rank), in ./data.
ft_make_data() {
  ftl-finetune-data --out data "${FT_DATA_ARGS[@]}" >/dev/null || { echo "ftl-finetune-data failed" >&2; return 1; }
  ftl run -n 1 --run-dir base-run -- ftl-finetune "${FT_ARGS[@]}" --steps 0 >base.out 2>&1 ||
    { cat base.out >&2; echo "building the base model failed" >&2; return 1; }
  rm -rf base-run base.out
}
# The data and the base model, made once for every test of the build (cached): every run below
# only loads them. They are copies: a test may edit its own.
FT_DATA_KEY="finetune data ${FT_DATA_ARGS[*]}; base ${FT_MODEL[*]}; $(bin_key ftl-finetune-data ftl-finetune)"
cached "$FT_DATA_KEY" . ft_make_data || fail "making the fine-tune's data and base model failed"

# same_adapter DIR1 DIR2: both adapters byte-identical.
same_adapter() {
  for f in adapter.safetensors adapter.json; do
    [ -f "$1/$f" ] || fail "$1/$f is missing"
    cmp "$1/$f" "$2/$f" || fail "$1/$f and $2/$f differ"
  done
}
