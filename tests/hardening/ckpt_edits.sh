#!/usr/bin/env bash
# tests/hardening/ckpt_edits.sh BIN_DIR MPIEXEC: issue 11, item 10, with real ranks (tests/ckpt's
# ckpt_mpi) and `ftl ckpt` (ckpt_cli_tool):
#  - a manifest edited after the commit (a dtype of the same size, a shape of the same row size, a
#    layout, the step of a copied folder) still passes its own checksums: verify must name the
#    field, and restore must take the step as corrupt (marked bad) and fall back;
#  - a FIFO in place of a shard: verify and restore return (20 s limit), naming "not a regular file";
#  - a step folder that is a symbolic link out of the run directory is refused: never read,
#    renamed, deleted or written through; nothing outside changes.
set -uo pipefail
bin=$1
mpiexec=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ftl-hard-edits-XXXXXX")
trap 'rm -rf "$work"' EXIT
export FTL_LOG_LEVEL=${FTL_LOG_LEVEL:-error} OMPI_MCA_btl=self,vader OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { local n=$1; shift; timeout 60 "$mpiexec" --oversubscribe -n "$n" "$bin/ckpt_mpi" "$@" || fail "mpirun -n $n ckpt_mpi $* exited $?"; }
cli() { timeout 20 "$bin/ckpt_cli_tool" ckpt "$@"; }
c=$work/r/checkpoints
sd() { printf '%s/step-%08d' "$c" "$1"; }
# edit STEP PYTHON-EXPR-ON-m: rewrites the step's manifest with the JSON edited.
edit() {
  python3 - "$(printf '%s/step-%08d' "$c" "$1")/manifest.json" "$2" <<'PY' || fail "edit of step $1 failed"
import json, sys
p, expr = sys.argv[1], sys.argv[2]
m = json.load(open(p))
item = {i["name"]: i for i in m["items"]}
exec(expr)
json.dump(m, open(p, "w"), indent=1)
PY
}
expect_verify_fails() { # STEP TEXT
  local out rc
  out=$(cli verify "$work/r" "$1"); rc=$?
  echo "$out"
  [ $rc -eq 1 ] || fail "verify of step $1 exited $rc, expected 1"
  grep -qF -- "$2" <<<"$out" || fail "verify of step $1 does not say '$2'"
}

# ---- edited manifests ----
run 2 write "$work/r" 10 20 30
mkdir -p "$(sd 50)"                                   # step 10's shards under step 50's name
python3 - "$(sd 10)/manifest.json" "$(sd 50)/manifest.json" <<'PY' || fail "copy"
import json, sys
m = json.load(open(sys.argv[1])); m["step"] = 50; json.dump(m, open(sys.argv[2], "w"), indent=1)
PY
cp "$(sd 10)"/shard-*.h5 "$(sd 50)/"
edit 30 'item["w"]["dtype"] = "i32"'                  # f32 -> i32: same size, parses
edit 20 'item["table"]["shape"] = [5, 3, 2]'          # [5,2,3] -> [5,3,2]: same row size
expect_verify_fails 50 "step mismatch"
expect_verify_fails 30 "dtype mismatch"
expect_verify_fails 20 "shape mismatch"
cli verify "$work/r" 10 >/dev/null || fail "verify of the untouched step 10 failed"
# Restore: each edited step is corrupt (marked bad), step 10 is loaded.
run 2 restore "$work/r" 10 3
out=$(cli ls "$work/r"); echo "$out"
for s in 50 30 20; do
  echo "$out" | grep -E "^$s +bad " >/dev/null || fail "step $s is not marked bad"
done
echo "$out" | grep -E "^50 +bad .*step mismatch" >/dev/null || fail "step 50's reason is not the step mismatch"
# A layout edit, alone in its run directory: verify names it, restore refuses the step.
run 2 write "$work/l" 10
c=$work/l/checkpoints edit 10 'item["w"]["kind"] = "replicated"'
out=$("$bin/ckpt_cli_tool" ckpt verify "$work/l" 10); rc=$?
echo "$out"
[ $rc -eq 1 ] && grep -q "layout mismatch" <<<"$out" || fail "verify of a layout edit: rc $rc"
run 2 restore "$work/l" corrupt 1

# ---- a FIFO in place of a shard ----
rm -rf "$work/r"
run 2 write "$work/r" 10 20
rm "$(sd 20)/shard-00001.h5"
mkfifo "$(sd 20)/shard-00001.h5"
out=$(cli verify "$work/r" 20); rc=$?
echo "$out"
[ $rc -ne 124 ] || fail "verify hangs on a FIFO"
[ $rc -eq 1 ] && grep -q "shard-00001.h5.*not a regular file" <<<"$out" || fail "verify of a FIFO: rc $rc"
out=$(timeout 20 "$mpiexec" --oversubscribe -n 2 "$bin/ckpt_mpi" restore "$work/r" 10 1 2>&1); rc=$?
echo "$out"
[ $rc -ne 124 ] || fail "restore hangs on a FIFO"
[ $rc -eq 0 ] || fail "restore with a FIFO in step 20 did not fall back to step 10 (rc $rc)"
grep -q "not a regular file" "$(sd 20)/bad-reason.txt" || fail "the FIFO is not named as the reason"
[ -p "$(sd 20)/shard-00001.h5" ] || fail "the FIFO was removed"

# ---- a step folder that is a symbolic link out of the run directory ----
rm -rf "$work/r"
run 2 write "$work/r" 10 20
mkdir -p "$work/outside"
cp -r "$(sd 20)" "$work/outside/step"
python3 - "$work/outside/step/manifest.json" <<'PY' || fail "edit"
import json, sys
m = json.load(open(sys.argv[1])); m["step"] = 30; json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
ln -s "$work/outside/step" "$(sd 30)"
ln -s "$work/outside/step" "$(sd 5)"
snap() { (cd "$work/outside" && find . -printf '%p %s %m\n' | sort && find . -type f -exec sha256sum {} + | sort); }
before=$(snap)
out=$(cli ls "$work/r"); echo "$out"
echo "$out" | grep -E "^30 +refused .*symbolic link" >/dev/null || fail "ls does not show step 30 as refused"
out=$(cli verify "$work/r"); rc=$?; echo "$out"
[ $rc -eq 1 ] && grep -q "step 30: REFUSED" <<<"$out" || fail "verify of all steps does not report the refused folder"
cli verify "$work/r" 30 >/dev/null && fail "verify of the refused step 30 passed"
run 2 restore "$work/r" 20 0
# A save of step 30 must not write through the link: the step is abandoned.
out=$(timeout 60 "$mpiexec" --oversubscribe -n 2 "$bin/ckpt_mpi" write "$work/r" 30 2>&1)
grep -q "symbolic link" <<<"$out" || { echo "$out"; fail "the save of step 30 did not name the link"; }
[ "$(snap)" = "$before" ] || { diff <(echo "$before") <(snap); fail "the save of step 30 wrote outside the run directory"; }
# Later saves: step 30 itself is refused (abandoned, not written through); the keep rule runs
# after steps 40..60 commit and must not delete through the links.
run 2 write "$work/r" 40 50 60
[ "$(snap)" = "$before" ] || { diff <(echo "$before") <(snap); fail "files outside the run directory changed"; }
[ -L "$(sd 30)" ] && [ -L "$(sd 5)" ] || fail "the links were removed"
run 2 restore "$work/r" 60 0
[ "$(snap)" = "$before" ] || fail "files outside the run directory changed"
echo PASS
