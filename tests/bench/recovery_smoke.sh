# tests/bench/recovery_smoke.sh: bench/recovery/run.sh --smoke: one SIGKILL per side (torchrun and
# ftl on the same job, the example fine-tune, and examples/torch-lora under torchrun and under ftl,
# every ftl side cold and with a standby parked),
# each side recovering to its first resumed step, and both tables printed with numbers in every
# measured cell. The torchrun side of the PyTorch example runs train.py's stand-in context
# (TorchrunContext), so a call the program makes that the stand-in lacks fails here. Skips (77)
# without Debian's python3-torch (torchrun).
. "$(dirname "$0")/lib.sh" || exit 1
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "SKIP: python3-torch is not installed"; exit 77; }
command -v torchrun >/dev/null || { echo "SKIP: torchrun is not on PATH"; exit 77; }
[ -x "$FTL_BIN_DIR/fault_probe" ] || { echo "SKIP: tests/fault's fault_probe is not in this build"; exit 77; }
export PYTHONDONTWRITEBYTECODE=1
run_bench 230 bash "$FTL_SOURCE_DIR/bench/recovery/run.sh" --smoke
expect_line '^recovery after SIGKILL of one of 4 ranks \(seconds after the kill, median of 1\);$'
expect_line '^phase +torchrun +ftl cold +ftl standby +fine-tune cold +fine-tune standby +standby/torchrun$'
expect_line "^noticed +$NUM +$NUM +$NUM +$NUM +$NUM +$NUM$"
expect_line "^new gang started +$NUM +$NUM +$NUM +$NUM +$NUM +$NUM$"
expect_line "^restored +$NUM +n/a +n/a +$NUM +$NUM +-$"
expect_line "^first resumed step +$NUM +$NUM +$NUM +$NUM +$NUM +$NUM$"
expect_line '^examples/torch-lora \(PyTorch, gloo'
expect_line '^phase +torchrun +ftl cold +ftl standby +cold/torchrun +standby/torchrun$'
expect_line "^restored +$NUM +$NUM +$NUM +$NUM +$NUM$"
expect_line "^first resumed step +$NUM +$NUM +$NUM +$NUM +$NUM$"
for side in ftl 'ftl fine-tune'; do
  expect_line "^goals, $side: new gang started <= 0.5 s after the kill: $NUM s \((met|NOT met)\); first resumed step <= half of torchrun's \($NUM s\): $NUM s \((met|NOT met)\)$"
done
for side in 'C job' fine-tune torch-lora; do
  expect_line "^goals, standby, $side: first resumed step <= 0.[0-9]+ s after the kill: $NUM s \((met|NOT met)\)$"
done
