# Same seed and world size: two runs through `ftl run` give byte-identical adapters (4 ranks),
# and the adapter learned something (its B matrices left zero).
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out1 run -n 4 --run-dir r1 -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 0
expect_rc 0 out1
run_ftl out2 run -n 4 --run-dir r2 -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 0
expect_rc 0 out2
expect_contains out1 "step $FT_STEPS/$FT_STEPS"
expect_contains out1 "held-out (64 examples)"
same_adapter r1/final r2/final
# A different seed gives a different adapter (the comparison above is not vacuous).
run_ftl out3 run -n 4 --run-dir r3 -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 0 --seed 2
expect_rc 0 out3
cmp -s r1/final/adapter.safetensors r3/final/adapter.safetensors && fail "seed 2 gave the same adapter as seed 1"
ftl-finetune-eval --base data/base.h5 --adapter r1/final --data data/heldout.txt --out eval.json >/dev/null ||
  fail "ftl-finetune-eval failed"
expect_contains eval.json '"exact_match"'
expect_no_leftovers
echo "ok"
