#!/usr/bin/env bash
# tests/ckpt/run_mpi.sh BIN_DIR MPIEXEC SCENARIO: one checkpoint scenario with real ranks under a
# real mpirun (crash scenarios SIGKILL a rank at an exact point). Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail
bin=$1
mpiexec=$2
scenario=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ftl-ckpt-$scenario-XXXXXX")
trap 'rm -rf "$work"' EXIT
export FTL_LOG_LEVEL=${FTL_LOG_LEVEL:-warn}
# One host: shared memory only. (Open MPI's TCP BTL also trips a lock-order report of TSan inside
# mca_btl_tcp during MPI_Init, which is not ours; without it the TSan build runs clean.)
export OMPI_MCA_btl=self,vader


fail() { echo "FAIL ($scenario): $*" >&2; exit 1; }
run() { # run N args...: mpirun that must succeed
  local n=$1; shift
  "$mpiexec" --oversubscribe -n "$n" "$bin/ckpt_mpi" "$@" || fail "mpirun -n $n ckpt_mpi $* exited $?"
}
cli() { "$bin/ckpt_cli_tool" ckpt "$@"; }

case "$scenario" in
dtypes)
  run 3 dtypes "$work/r"
  ;;
reshard)
  run 4 write "$work/by4" 10
  run 2 write "$work/by2" 10 20
  for n in 1 2 3 4; do
    run "$n" restore "$work/by4" 10 0 "$work/by2" 20 0
  done
  ;;
reshard_l1)
  # With L1 on (a private tmpfs folder, as /dev/shm is): a step written by 4 ranks restores at 1, 2
  # and 3 ranks from the host's memory, every rank's shards verified from L1 copies and none read
  # from the run directory; then, with the copies gone (a new boot), from the run directory.
  l1=$(mktemp -d /dev/shm/ftl-ckpt-test-XXXXXX) || fail "cannot make a folder in /dev/shm"
  trap 'rm -rf "$work" "$l1"' EXIT
  export FTL_CKPT_L1_DIR=$l1
  run 4 write "$work/by4" 10
  for n in 1 2 3; do
    FTL_LOG_LEVEL=info run "$n" restore "$work/by4" 10 0 >"$work/restore.$n" 2>&1 || { cat "$work/restore.$n" >&2; exit 1; }
    got=$(grep -c "restored step 10 (written by 4 ranks) in .* ms from L1 (host memory)$" "$work/restore.$n")
    [ "$got" -eq "$n" ] || { cat "$work/restore.$n" >&2; fail "$n ranks: $got of them restored from L1 alone"; }
  done
  rm -rf "${l1:?}"/ftl-*
  FTL_LOG_LEVEL=info run 2 restore "$work/by4" 10 0 >"$work/restore.gone" 2>&1 || { cat "$work/restore.gone" >&2; exit 1; }
  got=$(grep -c "restored step 10 (written by 4 ranks) in .* ms from L3 (the run directory)$" "$work/restore.gone")
  [ "$got" -eq 2 ] || { cat "$work/restore.gone" >&2; fail "with L1 gone, $got of 2 ranks restored from the run directory"; }
  ;;
crash-mid_shard | crash-after_shard_rename | crash-mid_manifest)
  point=${scenario#crash-}
  crank=1
  [ "$point" = mid_manifest ] && crank=0
  run 2 write "$work/r" 10 20
  FTL_CKPT_CRASH_AT=$point FTL_CKPT_CRASH_RANK=$crank FTL_CKPT_CRASH_STEP=30 \
    "$mpiexec" --oversubscribe -n 2 -x FTL_CKPT_CRASH_AT -x FTL_CKPT_CRASH_RANK -x FTL_CKPT_CRASH_STEP \
    "$bin/ckpt_mpi" write "$work/r" 30 >"$work/crash.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] || fail "the crashing run exited 0"
  grep -q "crash point $point reached" "$work/crash.log" || { cat "$work/crash.log"; fail "crash point not reached"; }
  [ ! -e "$work/r/checkpoints/step-00000030/manifest.json" ] || fail "step 30 has a manifest after the crash"
  case "$point" in
  mid_shard) [ ! -e "$work/r/checkpoints/step-00000030/shard-00001.h5" ] || fail "a half-written shard is under its final name" ;;
  after_shard_rename) [ -e "$work/r/checkpoints/step-00000030/shard-00001.h5" ] || fail "shard 1 was not renamed before the crash" ;;
  mid_manifest) [ -e "$work/r/checkpoints/step-00000030/manifest.json.tmp" ] || fail "no partial manifest left by the crash" ;;
  esac
  cli ls "$work/r"
  run 2 restore "$work/r" 20 0
  # The step number that crashed is used again: the stale folder must not confuse anything.
  run 2 write "$work/r" 30
  run 2 restore "$work/r" 30 0
  ;;
corrupt)
  run 2 write "$work/r" 10 20
  "$bin/ckpt_mpi" flip "$work/r" 20 1 w || fail "flip"
  out=$(cli verify "$work/r" 20); rc=$?
  echo "$out"
  [ $rc -eq 1 ] || fail "verify exited $rc, expected 1"
  grep -q "shard-00001.h5: FAILED: shard-00001.h5: checksum mismatch in tensor 'w'" <<<"$out" || fail "verify does not name the shard and tensor"
  cli verify "$work/r" 10 || fail "verify of the good step failed"
  run 2 restore "$work/r" 10 1
  out=$(cli ls "$work/r")
  echo "$out"
  echo "$out" | grep -E "^20 +bad .*checksum mismatch in tensor 'w'" >/dev/null || fail "ls does not show step 20 as bad with its reason"
  run 3 restore "$work/r" 10 0
  ;;
manifest)
  run 2 write "$work/r" 10 20 30
  c=$work/r/checkpoints
  head -c 100 "$c/step-00000030/manifest.json" >"$c/step-00000030/m" && mv "$c/step-00000030/m" "$c/step-00000030/manifest.json"
  sed -i 's/"version": 1,/"version": 9,/' "$c/step-00000020/manifest.json"
  grep -q '"version": 9' "$c/step-00000020/manifest.json" || fail "could not edit the manifest"
  out=$(cli verify "$work/r" 30); rc=$?
  echo "$out"
  [ $rc -eq 1 ] && grep -q "not valid JSON" <<<"$out" || fail "verify of broken JSON: rc $rc"
  run 2 restore "$work/r" 10 2
  out=$(cli ls "$work/r"); echo "$out"
  echo "$out" | grep -E "^30 +bad .*not valid JSON" >/dev/null || fail "step 30 not marked bad"
  echo "$out" | grep -E "^20 +bad .*version 9 is not supported" >/dev/null || fail "step 20 not marked bad"
  # The last committed step goes bad too: restore must say so, never start silently from scratch.
  "$bin/ckpt_mpi" flip "$work/r" 10 0 bias || fail "flip"
  run 2 restore "$work/r" corrupt 1
  ;;
faults)
  run 2 faults "$work/r"
  ;;
fresh)
  run 2 restore "$work/r" none 0
  ;;
cli)
  run 2 write "$work/r" 5 6
  cli ls "$work/r" | tee "$work/ls.txt" || fail "ls"
  grep -E "^6 +committed +2 " "$work/ls.txt" >/dev/null || fail "ls output"
  cli show "$work/r" 6 | tee "$work/show.txt" || fail "show"
  grep -q "bias .*replicated .*f64 .*\[7\]" "$work/show.txt" || fail "show lists the items"
  grep -q "shard-00001.h5" "$work/show.txt" || fail "show lists the shards"
  cli verify "$work/r" || fail "verify of all committed steps"
  cli verify "$work/r/checkpoints" 6 || fail "verify given the checkpoints folder"
  cli show "$work/r" 7; [ $? -eq 1 ] || fail "show of a missing step"
  cli ls; [ $? -eq 2 ] || fail "usage exit code"
  cli frob "$work/r"; [ $? -eq 2 ] || fail "usage exit code"
  cli ls "$work/nope"; [ $? -eq 2 ] || fail "missing folder exit code"
  # --level: the copies in this host's L1 folder (docs/checkpoint.md, "ftl ckpt"). Step 6 is an L3
  # step with an L1 copy of each shard here and no L2 copies (one host).
  mkdir "$work/l1"
  export FTL_CKPT_L1_DIR=$work/l1
  run 2 write "$work/r1" 5 6
  copy=$(ls "$work"/l1/ftl-*/step-00000006/shard-00001.h5) || fail "no L1 copy of step 6"
  cli verify "$work/r1" 6 --level l1 | tee "$work/v1.txt" || fail "verify --level l1"
  grep -qF "step 6: $copy: ok" "$work/v1.txt" || fail "verify --level l1 does not name the L1 copy"
  cli verify --level=l1 "$work/r1" || fail "verify --level=l1 of every step in the L1 folder"
  cli show "$work/r1" 6 --level l1 | tee "$work/s1.txt" || fail "show --level l1"
  grep -qF "l1 copy here: $copy" "$work/s1.txt" || fail "show --level l1 does not name the copy"
  out=$(cli verify "$work/r1" 6 --level l2); rc=$?
  [ $rc -eq 1 ] || fail "verify --level l2 without L2 copies exited $rc, expected 1"
  grep -q "step 6: no l2 copy on this host" <<<"$out" || fail "verify --level l2 does not say there is no copy"
  python3 -c 'import os, sys
p = sys.argv[1]
with open(p, "r+b") as f:
    f.seek(os.path.getsize(p) // 2); b = f.read(1); f.seek(-1, 1); f.write(bytes([b[0] ^ 0x40]))' "$copy" ||
    fail "cannot flip a byte of $copy"
  out=$(cli verify "$work/r1" 6 --level l1); rc=$?
  echo "$out"
  [ $rc -eq 1 ] || fail "verify --level l1 of a damaged copy exited $rc, expected 1"
  grep -qF "step 6: $copy: FAILED" <<<"$out" || fail "verify --level l1 does not name the damaged copy"
  cli verify "$work/r1" 6 || fail "the run directory's step 6 no longer verifies"
  cli verify "$work/r1" 6 --level l5; [ $? -eq 2 ] || fail "usage exit code of a bad level"
  cli ls "$work/r1" --level l1; [ $? -eq 2 ] || fail "ls takes no level"
  FTL_CKPT_L1_DIR=$work/nothing cli verify "$work/r1" --level l1; [ $? -eq 1 ] || fail "verify --level l1 without an L1 folder"
  unset FTL_CKPT_L1_DIR
  ;;
h5py)
  py=/usr/bin/python3
  [ -x $py ] && $py -c "import h5py, numpy" 2>/dev/null || { echo "skipped: h5py for /usr/bin/python3 is not installed"; exit 77; }
  run 2 write "$work/r" 10
  command -v h5dump >/dev/null && { h5dump -H "$work/r/checkpoints/step-00000010/shard-00000.h5" >/dev/null || fail "h5dump"; }
  $py "$here/check_h5py.py" "$work/r/checkpoints/step-00000010" || fail "h5py check"
  ;;
device)
  "$mpiexec" --oversubscribe -n 1 "$bin/ckpt_mpi" device "$work/r"
  exit $?
  ;;
*)
  fail "unknown scenario"
  ;;
esac
echo "ok ($scenario)"
