# tests/python/doc_example.sh: docs/python.md's "A complete example", taken from the page as it is
# written, run under `ftl run -n 2`: unbroken; with rank 1 SIGKILLed right after the commit of its
# last step (1000: the restarted gang restores it, trains nothing, ck.wait() returns); and run again
# once finished ("already finished", exit 0, no rank started, under 5 s). The committed state of
# each is the unbroken run's, item for item (`ftl ckpt show`'s digests).
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
export PYTHONDONTWRITEBYTECODE=1
# The binding from the source tree, as a user of an installed ftl has it on their path (it finds the
# build's library through FTL_BIN_DIR).
export PYTHONPATH=$FTL_SOURCE_DIR/python${PYTHONPATH:+:$PYTHONPATH}
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "SKIP: python3-numpy is not installed"; exit 77; }
awk '/^## A complete example/ { found = 1 } found && /^```python/ { take = 1; next } take && /^```/ { exit } take' \
  "$FTL_SOURCE_DIR/docs/python.md" >train.py
grep -q 'ftl.init()' train.py || fail "no example found under '## A complete example' in docs/python.md"
chmod +x train.py
# digests RUNDIR: every item's digest of its committed step 1000, one per line.
digests() { ftl ckpt show "$1" 1000 | sed -n 's/^ \{4\}\([a-z_]*\) .*xxh3 \([0-9a-f]*\)$/\1 \2/p'; }

run_ftl ref.out run -n 2 --run-dir ref -- ./train.py
expect_rc 0 ref.out
digests ref >ref.digests
[ -s ref.digests ] || fail "the unbroken run committed no step 1000"

FTL_CRASH_AT=after_commit FTL_CRASH_RANK=1 FTL_CRASH_STEP=1000 run_ftl kill.out run -n 2 --run-dir k -- ./train.py
expect_rc 0 kill.out
expect_contains kill.out "crash point after_commit reached"
[ -d k/attempt-0001 ] || fail "rank 1 killed after the last commit: no second attempt"
# The second attempt restored step 1000 and saved nothing: no step after it, no newer commit.
grep '"event":"ckpt_committed"' k/events.jsonl | grep -q '"attempt":1[,}]' && fail "the restarted attempt committed again"
grep -q '"event":"ckpt_restored".*"step":1000' k/events.jsonl || fail "the restarted attempt did not restore step 1000"
digests k | cmp -s - ref.digests || { digests k >&2; fail "after the kill, step 1000 differs from the unbroken run's"; }

start=$(date +%s%N)
run_ftl again.out run -n 2 --run-dir k -- ./train.py
took_ms=$((($(date +%s%N) - start) / 1000000))
expect_rc 0 again.out
expect_contains again.out "already finished: job 'train.py' trained to its end"
[ ! -d k/attempt-0002 ] || fail "the rerun of a finished run started ranks"
[ "$took_ms" -lt 5000 ] || fail "the rerun of a finished run took $took_ms ms"
echo "ok: unbroken, killed after the last commit, and rerun (${took_ms} ms) end alike"
