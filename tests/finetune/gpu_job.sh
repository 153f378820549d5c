# The CUDA path end to end: the small job on 2 ranks with --device cuda, twice through `ftl run`:
# both runs byte-identical (the GPU kernels have no atomics), and the adapter lowers the held-out
# loss as on the CPU. Registered only in a build with the CUDA path (tests/finetune/CMakeLists.txt).
# Skipped (77) only where there is no GPU (no /dev/nvidia*: checked before building the small base
# model); a GPU that is there and does not work (a driver too old or broken, which the program
# reports as "no CUDA path or there is no GPU") fails, the rule of tests/gpu/gpu_test.h.
ls /dev/nvidia[0-9]* >/dev/null 2>&1 || { echo "skipped: no /dev/nvidia*"; exit 77; }
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl g1.out run -n 2 --run-dir g1 -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 0 --device cuda
if grep -q "no CUDA path or there is no GPU" g1.out; then
  fail "a GPU is there (/dev/nvidia*) but the CUDA path could not use it (see g1.out)"
fi
expect_rc 0 g1.out
expect_contains g1.out "on the GPU (CUDA path)"
run_ftl g2.out run -n 2 --run-dir g2 -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 0 --device cuda
expect_rc 0 g2.out
same_adapter g1/final g2/final
# The adapter must help: held-out loss with it below the base model's.
line=$(grep -o "base model: loss [0-9.]*, exact match [0-9.]*% | with the adapter: loss [0-9.]*" g1.out | head -1)
[ -n "$line" ] || fail "no held-out line"
base=$(echo "$line" | sed 's/base model: loss \([0-9.]*\),.*/\1/')
adapter=$(echo "$line" | sed 's/.*with the adapter: loss \([0-9.]*\)/\1/')
awk -v b="$base" -v a="$adapter" 'BEGIN { exit !(a < b) }' || fail "held-out loss with the adapter ($adapter) is not below the base's ($base)"
echo "GPU: $line"
expect_no_leftovers
echo "ok"
