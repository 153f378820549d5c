#!/usr/bin/env bash
# Issue 11, item 3: a full disk, for real (a small tmpfs; skipped with 77 only where mounting is
# not permitted).
#  a. The fine-tune's run directory on a tmpfs with room for a step or two: a later checkpoint meets
#     ENOSPC. The run fails cleanly (or recovers and exits as the program decided): ENOSPC and the
#     shard are named; no rank dies of SIGSEGV (HDF5's shutdown after an abandoned step), in the
#     output or in the ranks' exit records; the ledger blames no signal; every committed step left
#     still verifies (`ftl ckpt verify`).
#  b. The final adapter on a full disk (--final-dir on a tiny tmpfs): the program fails naming
#     ENOSPC, no SIGSEGV, and final/ is not left looking committed (`ftl export` refuses it).
. "$FTL_SOURCE_DIR/tests/hardening/lib.sh" || exit 1
mkdir disk tiny
mount -t tmpfs -o size=200k tmpfs disk 2>/dev/null || { echo "skipped: mounting a tmpfs is not permitted here"; exit 77; }
trap 'umount "$SCRATCH/disk" 2>/dev/null; umount "$SCRATCH/tiny" 2>/dev/null; pkill -KILL -f "$MARKER" 2>/dev/null; remove_scratch' EXIT
mount -t tmpfs -o size=8k tmpfs tiny || fail "the second tmpfs could not be mounted"

# a.
ft_run full.out disk/r 2
echo "ftl run exited $RC"
grep -v '^\[rank [0-9]*\] step ' full.out | head -40
no_sigsegv full.out disk/r/attempt-*/rank-*.exit.json disk/r/attempt-*/rank-*.err
# A signal in an exit record is a crash unless it is the launcher's own ending of a survivor: SIGKILL
# (a parked standby takes over: the survivors are killed at once) or SIGTERM (a cold teardown). The
# failure itself must blame no signal: the ledger's check below.
grep -l -E '"signal": *([1-8]|1[0-46-9]|[2-9][0-9])[^0-9]' disk/r/attempt-*/rank-*.exit.json 2>/dev/null &&
  fail "a rank's exit record names a signal other than the launcher's SIGKILL or SIGTERM"
if [ -f disk/r/failures.jsonl ]; then
  grep -q -E 'SIGSEGV|"signal": *11' disk/r/failures.jsonl && fail "the ledger blames SIGSEGV"
fi
if [ "$RC" -ne 0 ]; then
  expect_contains full.out "No space left on device"
  grep -q -E "shard-0000[01]\.h5" full.out || fail "the shard that met the full disk is not named"
  grep -q -E "HDF5 error: *$|no space left on device: *$" full.out && fail "an error message with nothing after it"
fi
steps=$(committed_steps disk/r)
[ -n "$steps" ] || fail "nothing was committed before the disk filled (make the tmpfs bigger)"
for s in $steps; do
  ftl ckpt verify disk/r "$s" >verify.out 2>&1 || { cat verify.out >&2; fail "committed step $s no longer verifies"; }
done

# b.
ft_run final.out r2 2 --final-dir tiny/final --ckpt-every 0
echo "ftl run (final adapter) exited $RC"
[ "$RC" -ne 0 ] || { cat final.out >&2; fail "writing the final adapter on a full disk exited 0"; }
expect_contains final.out "No space left on device"
no_sigsegv final.out r2/attempt-*/rank-*.exit.json r2/attempt-*/rank-*.err
ftl export tiny -o exported >export.out 2>&1 &&
  fail "the half-written final adapter was accepted by ftl export"
echo PASS
