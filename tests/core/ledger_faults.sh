# tests/core/ledger_faults.sh: the file seam's faults reach the ledgers (core/jsonl.c through
# core/fs.h), in real processes (ledger_tool, tests/core/ledger_tool.c, the fleet ledger's own
# writer and reader):
#   - ENOSPC on an append: a clear error naming the ledger, every earlier record byte for byte;
#   - a torn write the file system reports whole: refused, the ledger as it was;
#   - EIO from the record's fsync: an error naming the ledger, earlier records untouched;
#   - a writer killed after a torn write, before its fsync (FTL_FAULT=tear:1 with
#     FTL_CRASH_AT=jsonl.append): the reader skips the one torn line and counts every whole record,
#     the next append repairs it (ends it with '\n') and its own record reads back whole;
#   - a writer killed after a whole write, before its fsync: its record is there.
set -u
: "${FTL_BIN_DIR:?FTL_BIN_DIR must point at the bin folder of the build}"
export PATH="$FTL_BIN_DIR:$PATH"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/ftl-ledger.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
cd "$SCRATCH" || exit 1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# expect_load WANT: ledger_tool load prints exactly WANT.
expect_load() {
  got=$(ledger_tool load "$L" 2>load.err) || { cat load.err >&2; fail "load failed"; }
  [ "$got" = "$1" ] || { cat "$L" >&2; fail "load: got '$got', expected '$1'"; }
}
L=$SCRATCH/fleet.jsonl
ledger_tool append "$L" 0 && ledger_tool append "$L" 1 || fail "baseline appends failed"
cp "$L" before
expect_load "lines 2 skipped 0 rank_hours 2"

# ENOSPC on the append.
FTL_FAULT=write:1:ENOSPC ledger_tool append "$L" 2 2>err && fail "ENOSPC: the append reported success"
grep -qF "cannot append to $L: No space left on device" err || { cat err >&2; fail "ENOSPC: no clear error naming the ledger"; }
cmp -s "$L" before || fail "ENOSPC: the ledger changed"

# A torn write that reports success.
FTL_FAULT=tear:1 ledger_tool append "$L" 2 2>err && fail "tear: the append reported success"
grep -qF "append to $L was torn" err || { cat err >&2; fail "tear: no error naming the ledger"; }
cmp -s "$L" before || fail "tear: the ledger was not put back as it was"

# EIO from the fsync: the record was written; the earlier ones are untouched.
FTL_FAULT=fsync:1:EIO ledger_tool append "$L" 2 2>err && fail "fsync EIO: the append reported success"
grep -qF "cannot fsync $L" err || { cat err >&2; fail "fsync EIO: no error naming the ledger"; }
cmp -s -n "$(stat -c %s before)" "$L" before || fail "fsync EIO: an earlier record changed"
expect_load "lines 3 skipped 0 rank_hours 3"

# A writer killed mid-append: half a line, no newline.
FTL_FAULT=tear:1 FTL_CRASH_AT=jsonl.append ledger_tool append "$L" 3 2>err
rc=$?
[ $rc -eq 137 ] || { cat err >&2; fail "crash after a torn write: expected a SIGKILL (137), got $rc"; }
[ "$(tail -c 1 "$L" | od -An -c | tr -d ' ')" != '\n' ] || fail "crash after a torn write: the last line is whole"
expect_load "lines 4 skipped 1 rank_hours 3"
# The next append repairs it; the torn line stays one bad line, every whole record counts.
ledger_tool append "$L" 4 || fail "the append after a torn one failed"
[ "$(tail -c 1 "$L" | od -An -c | tr -d ' ')" = '\n' ] || fail "the repairing append did not end with a newline"
expect_load "lines 5 skipped 1 rank_hours 4"

# A writer killed after a whole write, before its fsync.
FTL_CRASH_AT=jsonl.append ledger_tool append "$L" 5 2>err
[ $? -eq 137 ] || { cat err >&2; fail "crash after a whole write: expected a SIGKILL"; }
expect_load "lines 6 skipped 1 rank_hours 5"
ledger_tool append "$L" 6 || fail "the append after a crash failed"
expect_load "lines 7 skipped 1 rank_hours 6"
echo ok
