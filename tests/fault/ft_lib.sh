# tests/fault/ft_lib.sh: fault tests on the example fine-tune. Sets up the fine-tune's small
# configuration (tests/finetune/lib.sh), a failure-free reference run, and job specs.
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
. "$(dirname "$0")/lib.sh" || exit 1
FT_EVERY=7

# flip_middle_byte FILE: one bit of the byte in the middle of FILE flipped in place (a damaged
# checkpoint copy that keeps its size).
flip_middle_byte() {
  python3 - "$1" <<'PY' || fail "cannot flip a byte of $1"
import os, sys
p = sys.argv[1]
with open(p, "r+b") as f:
    f.seek(os.path.getsize(p) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x40]))
PY
}

# write_job FILE NAME RANKS [extra YAML lines...]: a job spec running the small fine-tune (FT_ENV:
# more of its env, as YAML flow entries: "A: x, B: y").
write_job() {
  local file=$1 name=$2 ranks=$3
  shift 3
  {
    echo "name: $name"
    echo "ranks: $ranks"
    echo "program: ftl-finetune"
    echo "args: $(yaml_list "${FT_ARGS[@]}" --ckpt-every "$FT_EVERY" --throttle-ms 30)"
    echo "env: {FTL_BACKEND: mpi${FT_ENV:+, $FT_ENV}}"
    printf '%s\n' "$@"
  } >"$file"
}

# ckpt_l3_every FILE N: the job write_job wrote to FILE saves every Nth step in the run directory
# (L3) and the others below it (--ckpt-l3-every N after its --ckpt-every).
ckpt_l3_every() {
  sed -i "s/\"--ckpt-every\", \"$FT_EVERY\"/&, \"--ckpt-l3-every\", \"$2\"/" "$1"
  grep -q "\"--ckpt-l3-every\", \"$2\"" "$1" || { cat "$1" >&2; fail "cannot set --ckpt-l3-every in $1"; }
}

# reference RANKS: the failure-free run's adapter in ref-RANKS/final, its output in ref-RANKS.out.
# It is the same run for every test of the build that asks for it with the same settings, so it is
# made once (cached: the key holds everything the adapter depends on; the marker only tags
# processes).
reference() {
  local args=("${FT_ARGS[@]}" --ckpt-every "$FT_EVERY")
  local key="finetune reference -n $1 ${args[*]/$MARKER/}; FTL_BACKEND=${FTL_BACKEND:-}; OMP_NUM_THREADS=${OMP_NUM_THREADS:-}; $FT_DATA_KEY; $(bin_key ftl)"
  cached "$key" "ref-$1" ft_reference_run "$1" "${args[@]}" || fail "the failure-free run on $1 ranks failed"
  mv "ref-$1/run.out" "ref-$1.out"
}
# ft_reference_run RANKS ARGS...: in a folder of its own (data/ copied in), the run; its final/ and
# its output (run.out) kept.
ft_reference_run() {
  local n=$1
  shift
  cp -a "$SCRATCH/data" data || return 1
  ftl run -n "$n" --run-dir run -- ftl-finetune "$@" >run.out 2>&1 || { cat run.out >&2; return 1; }
  mv run/final final && rm -rf run data
}

# committed_steps RUNDIR: the committed checkpoint steps, one per line.
committed_steps() { ls "$1"/checkpoints/step-*/manifest.json 2>/dev/null | sed 's/.*step-0*\([0-9][0-9]*\)\/manifest.json/\1/'; }

# wait_first_commit RUNDIR: until the run has a committed checkpoint (30 s at most; then the job's
# output is shown and the test fails).
wait_first_commit() {
  for _ in $(seq 1 300); do
    [ -n "$(committed_steps "$1")" ] && return 0
    sleep 0.1
  done
  cat out >&2
  fail "no committed checkpoint in $1 after 30 s"
}

# verify_all RUNDIR: every committed checkpoint left verifies (none was damaged).
verify_all() {
  for s in $(committed_steps "$1"); do
    ftl ckpt verify "$1" "$s" >/dev/null 2>&1 || fail "committed checkpoint $s of $1 no longer verifies"
  done
}
