# Malformed job specs through the CLI: each one exits 2 with the file, line and field at fault,
# and starts nothing (no run directory is created).
. "$(dirname "$0")/lib.sh" || exit 1
check() { # name, expected text, spec...
  local name=$1 want=$2
  shift 2
  printf '%s\n' "$@" > "$name.yaml"
  run_ftl "$name.out" run "$name.yaml"
  expect_rc 2 "$name.out"
  expect_contains "$name.out" "$want"
  [ ! -d "runs/$name" ] || fail "$name: a run directory was created for a bad spec"
}
check unknown "unknown.yaml:3:1: field 'rankz'" "name: a" "program: ftl-allreduce-check" "rankz: 2"
check wrongtype "wrongtype.yaml:2:8: field 'ranks'" "program: ftl-allreduce-check" "ranks: four"
check noprogram "field 'program'" "name: a" "ranks: 2"
check zero "zero.yaml:1:8: field 'ranks'" "ranks: 0" "program: ftl-allreduce-check"
check negative "negative.yaml:1:8: field 'ranks'" "ranks: -3" "program: ftl-allreduce-check"
run_ftl missing.out run does-not-exist.yaml
expect_rc 2 missing.out
expect_contains missing.out "does-not-exist.yaml"
mkdir adir.yaml
run_ftl dir.out run adir.yaml
expect_rc 2 dir.out
expect_contains dir.out "adir.yaml"
# Reserved names in env: ftl's own variables and Open MPI's (issue 11, item 8).
check reserved "reserved.yaml:3:23: field 'env.FTL_RDZV_TOKEN': reserved" "ranks: 1" "program: /bin/true" "env: {FTL_RDZV_TOKEN: x}"
check reserved2 "field 'env.MASTER_PORT': reserved: ftl sets MASTER_PORT" "ranks: 1" "program: /bin/true" "env: {MASTER_PORT: 1}"
check reserved3 "field 'env.OMPI_MCA_btl': reserved" "ranks: 1" "program: /bin/true" "env: {OMPI_MCA_btl: tcp}"
# restart.preload takes module names only (the Python runner's standby imports them).
check preload "field 'restart.preload': 'torch; rm' is not a Python module name" "ranks: 1" "program: /bin/true" \
  "restart: {preload: [torch, 'torch; rm']}"
check pyrunner "field 'restart.python_runner'" "ranks: 1" "program: /bin/true" "restart: {python_runner: maybe}"
# mfu: the peak table's column and a peak override (docs/gpu.md, "Useful work: MFU").
check mfuprec "mfuprec.yaml:3:18: field 'mfu.precision'" "ranks: 1" "program: /bin/true" "mfu: {precision: fp8}"
check mfupeak "field 'mfu.peak_tflops': expected a device's peak in TFLOPS, more than 0" "ranks: 1" \
  "program: /bin/true" "mfu: {peak_tflops: -989}"
check mfupeak0 "field 'mfu.peak_tflops'" "ranks: 1" "program: /bin/true" "mfu: {peak_tflops: 0}"
check mfupeakinf "field 'mfu.peak_tflops'" "ranks: 1" "program: /bin/true" "mfu: {peak_tflops: .inf}"
# The alias bomb of issue 11 (item 7): one anchored 100 KB string aliased 9000 times in args, a
# 127 KB file, is refused at once naming the limit and the field, not expanded to 900 MB.
python3 -c "
import sys
sys.stdout.write('ranks: 1\nprogram: /bin/true\nargs: [&big \"' + 'a' * 102400 + '\"' + ',*big' * 9000 + ']\n')
" > bomb.yaml
start=$(date +%s%N)
run_ftl bomb.out run bomb.yaml
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
expect_rc 2 bomb.out
expect_contains bomb.out "bomb.yaml:3:"
expect_contains bomb.out "field 'args[40]': with its aliases expanded the document holds more than 4194304 bytes of text (the limit)"
[ "$elapsed_ms" -lt 1000 ] || fail "the alias bomb took ${elapsed_ms} ms to refuse"
[ ! -d runs/bomb ] || fail "a run directory was created for the alias bomb"
run_ftl n0.out run -n 0 -- true
expect_rc 2 n0.out
expect_contains n0.out "-n"
echo "ok"
