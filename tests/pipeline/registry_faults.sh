# The file seam's faults reach the registry (core/fs.h, docs/formats/registry.md): `ftl registry
# publish` and `ftl promote` run with FTL_FAULT failing their Nth write (ENOSPC), their Nth fsync
# (EIO), or tearing their Nth write (half written, success reported), for every N the command
# reaches, each from the same starting registry. After each failure: the error names a file of the
# registry and says what happened; `ftl registry check` passes; prod serves the old version or the
# new one, complete; the version already there is byte for byte as before; no temporary is left;
# and a retry without faults succeeds. Then the crash point in the JSON-lines append
# (FTL_CRASH_AT=jsonl.append, alone and after a torn write: a writer killed mid-append) on a
# promote: check passes, the retry moves the channel. (The crash points inside publish and the
# channel move: registry_crash.sh.)
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
ftl registry help >/dev/null 2>&1 || { echo "skipped: this build's ftl has no registry command"; exit 77; }
v1=$(make_package p1.tar.zst one)
v2=$(make_package p2.tar.zst two)
# Two starting registries: prod at v1 (for publish), and v2 stored beside it (for promote).
BASE=$SCRATCH/base-publish
ftl registry publish --registry "$BASE" chat p1.tar.zst --channel prod --unverified >/dev/null || fail "set-up publish"
BASE2=$SCRATCH/base-promote
cp -a "$BASE" "$BASE2"
ftl registry publish --registry "$BASE2" chat p2.tar.zst --unverified >/dev/null || fail "set-up publish of v2"

# after_failure REG WHAT ERRFILE WANT_TEXT: the checks every failed command must pass.
after_failure() {
  local reg=$1 what=$2 err=$3 want=$4
  grep -qF "$reg/chat/" "$err" || { cat "$err" >&2; fail "$what: the error names no file of the registry"; }
  grep -qF "$want" "$err" || { cat "$err" >&2; fail "$what: the error does not say '$want'"; }
  ftl registry check --registry "$reg" chat >check.out 2>&1 || { cat "$err" check.out >&2; fail "$what: check fails"; }
  now=$(pipeline_tool resolve "$reg" chat@prod) || fail "$what: prod does not resolve"
  [ "$now" = "$v1" ] || [ "$now" = "$v2" ] || fail "$what: prod points at $now"
  diff -r "$BASE/chat/versions/$v1" "$reg/chat/versions/$v1" >/dev/null || fail "$what: the committed v1 changed"
  if [ -n "$(find "$reg/chat" -name '*.tmp*' -o -name '.tmp-*')" ]; then
    ls -laR "$reg/chat" >&2
    fail "$what: a temporary was left"
  fi
}

# run_cmd CMD REG: CMD (publish or promote) moves REG's prod to v2.
run_cmd() {
  if [ "$1" = publish ]; then
    ftl registry publish --registry "$2" chat p2.tar.zst --channel prod --unverified
  else
    ftl promote --registry "$2" chat "$v2" --to prod
  fi
}

# The sweep's three steps (fault_sweep, tests/pipeline/lib.sh); each N has its own registry, a copy
# of the starting one.
fault_try() {
  local reg=$SCRATCH/reg-$1-$FAULT_N
  rm -rf "$reg"
  if [ "$1" = publish ]; then cp -a "$BASE" "$reg"; else cp -a "$BASE2" "$reg"; fi
  FTL_FAULT=$2 run_cmd "$1" "$reg" >out 2>err
}

fault_done() {
  local reg=$SCRATCH/reg-$1-$FAULT_N
  [ "$(pipeline_tool resolve "$reg" chat@prod)" = "$v2" ] || fail "$1 $2: success, but prod is not v2"
  ftl registry check --registry "$reg" chat >/dev/null || fail "$1 $2: success, but check fails"
}

# Each failed run passes after_failure, and the user's retry then completes the move.
fault_failed() {
  local cmd=$1 fs=$2 want=$3 reg=$SCRATCH/reg-$1-$FAULT_N
  after_failure "$reg" "$cmd $fs" err "$want"
  run_cmd "$cmd" "$reg" >out 2>&1 || { cat out >&2; fail "$cmd $fs: the retry failed"; }
  [ "$(pipeline_tool resolve "$reg" chat@prod)" = "$v2" ] || fail "$cmd $fs: prod is not v2 after the retry"
  ftl registry check --registry "$reg" chat >check.out 2>&1 || { cat check.out >&2; fail "$cmd $fs: check after the retry"; }
  rm -rf "$reg"
}

# faults CMD SPEC WANT_TEXT: CMD (publish or promote) under FTL_FAULT=SPEC with N = 1, 2, ... until
# a run succeeds (the fault lies beyond the command's last call); every failed run is checked.
faults() { fault_sweep 80 "$@"; }

faults publish write:N:ENOSPC "No space left on device"
faults publish fsync:N:EIO "fsync"
faults publish tear:N "torn"
faults promote write:N:ENOSPC "No space left on device"
faults promote fsync:N:EIO "fsync"
faults promote tear:N "torn"

# A promote killed right after its audit line's write, before the fsync; the line whole, then torn.
for how in whole torn; do
  REG=$SCRATCH/reg-crash-$how
  rm -rf "$REG"
  cp -a "$BASE2" "$REG"
  if [ $how = torn ]; then
    FTL_FAULT=tear:1 FTL_CRASH_AT=jsonl.append ftl promote --registry "$REG" chat "$v2" --to prod >crash.out 2>&1
  else
    FTL_CRASH_AT=jsonl.append ftl promote --registry "$REG" chat "$v2" --to prod >crash.out 2>&1
  fi
  rc=$?
  [ $rc -eq 137 ] || { cat crash.out >&2; fail "jsonl.append ($how): expected a SIGKILL (137), got $rc"; }
  [ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v1" ] || fail "jsonl.append ($how): prod moved"
  ftl registry check --registry "$REG" chat >check.out 2>&1 || { cat check.out >&2; fail "jsonl.append ($how): check"; }
  ftl promote --registry "$REG" chat "$v2" --to prod >out 2>&1 || { cat out >&2; fail "jsonl.append ($how): retry"; }
  [ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v2" ] || fail "jsonl.append ($how): prod is not v2 after the retry"
  ftl registry check --registry "$REG" chat >check.out 2>&1 || { cat check.out >&2; fail "jsonl.append ($how): check after the retry"; }
  [ "$(pipeline_tool rollback "$REG" chat prod)" = "$v1" ] || fail "jsonl.append ($how): rollback after the retry"
  echo "crash at jsonl.append ($how write): consistent, retry ok"
done
echo ok
