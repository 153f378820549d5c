# tests/hardening/lib.sh: helpers of the hardening tests on checkpoints (issue 11): the fine-tune's
# small configuration (tests/finetune/lib.sh, which brings the launcher tests' helpers) and ways
# to damage a run directory's checkpoints.
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
export FTL_LOG_LEVEL=${FTL_LOG_LEVEL:-warn}

# committed_steps RUNDIR: the committed checkpoint steps, newest last.
committed_steps() {
  ls "$1"/checkpoints/step-*/manifest.json 2>/dev/null | sed 's/.*step-0*\([0-9][0-9]*\)\/manifest.json/\1/' | sort -n
}

# step_dir RUNDIR STEP
step_dir() { printf '%s/checkpoints/step-%08d' "$1" "$2"; }

# flip_tensor_byte RUNDIR STEP SHARD: flips one byte inside the first dataset of the shard (tensor
# data, found with `ftl ckpt show`), so only its checksum can tell.
flip_tensor_byte() {
  local sd off
  sd=$(step_dir "$1" "$2")
  off=$(ftl ckpt show "$1" "$2" | awk -v f="$(printf 'shard-%05d.h5' "$3")" '
      $1 == f {on = 1; next} on && /at byte/ {for (i = 1; i <= NF; i++) if ($i == "byte") {sub(",", "", $(i+1)); print $(i+1); exit}}')
  [ -n "$off" ] || fail "no dataset found in step $2 shard $3"
  python3 - "$sd/$(printf 'shard-%05d.h5' "$3")" "$((off + 1))" <<'PY' || fail "flip failed"
import sys
p, o = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0x5A]))
PY
}

# ft_run OUT RUNDIR RANKS [extra ftl-finetune args]: one `ftl run` of the small fine-tune; $RC set.
ft_run() {
  local out=$1 rd=$2 n=$3
  shift 3
  run_ftl "$out" run -n "$n" --run-dir "$rd" -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 7 "$@"
}

# no_signal_blamed FILE...: no SIGSEGV (or other signal) named as a rank's end in the files.
no_sigsegv() {
  if grep -l -E 'SIGSEGV|Segmentation fault|signal 11' "$@" 2>/dev/null; then
    fail "a rank died of SIGSEGV (see the files above)"
  fi
}
