# tests/python/plain_standby.sh: a torchrun script that knows nothing of ftl (tests/python/plain_ddp.py)
# restarted after a SIGKILL of rank 1, warm and cold (issue 34). Warm: ftl runs it through
# launcher/pyrun.py, whose standby parks with torch imported; the standby takes over and the first
# step after the kill comes within a second. Cold (--no-standby): the next attempt starts without
# waiting for mpirun's teardown. Both end with the final weights of an unbroken run, byte for byte.
. "$(dirname "$0")/torch_lib.sh" || exit 1
# The ranks hold after step 30 (its checkpoint written) until the test has killed rank 1: the run
# outlasts the event the test waits for, however slow the machine.
PLAIN=(/usr/bin/python3 "$FTL_SOURCE_DIR/tests/python/plain_ddp.py" --steps 60 --step-ms 40 --ckpt-every 10 --hold-at 30)

touch go-ref
run_ftl ref.out run -n 2 --max-restarts 0 --run-dir ref -- "${PLAIN[@]}" --hold-file "$SCRATCH/go-ref" --ckpt-dir "$SCRATCH/ref-ck" \
  --out "$SCRATCH/ref.bin"
expect_rc 0 ref.out
[ -s ref.bin ] || fail "the unbroken run wrote no weights"

# killed RUN WAIT_EVENT [FTL OPTIONS]: kills rank 1 once WAIT_EVENT is logged (the ranks hold at
# step 30 until then), then lets the ranks go on; the run must end 0
# with the reference's weights. Prints the seconds from the kill to the first step after it.
killed() {
  local run=$1 event=$2
  shift 2
  ftl run -n 2 --max-restarts 2 --run-dir "$run" "$@" -- "${PLAIN[@]}" --ckpt-dir "$SCRATCH/$run-ck" \
    --out "$SCRATCH/$run.bin" --log-dir "$SCRATCH/$run-log-$MARKER" --hold-file "$SCRATCH/go-$run" >"$run.out" 2>&1 &
  local pid=$! victim t_kill
  wait_for_event "$run" "$event" "$run.out"
  victim=$(rank_pid "$run" plain_ddp.py 1 python3)
  [ -n "$victim" ] || { cat "$run.out" >&2; fail "$run: rank 1's program not found"; }
  t_kill=$(date +%s.%N)
  kill -KILL "$victim"
  touch "go-$run"
  wait_rc $pid
  expect_rc 0 "$run.out"
  cmp -s ref.bin "$run.bin" || fail "$run: the final weights differ from the unbroken run's"
  /usr/bin/python3 - "$SCRATCH/$run-log-$MARKER" "$t_kill" <<'PY'
import glob, sys
t = float(sys.argv[2])
firsts = []
for path in glob.glob(sys.argv[1] + "/rank-*.log"):
    after = [float(w[2]) for w in (l.split() for l in open(path)) if w and w[0] == "step" and float(w[2]) > t]
    firsts.append(min(after))
print(f"first step after the kill: {max(firsts) - t:.3f} s")
PY
}

killed warm standby_parked
grep -q '"event":"attempt_start".*"attempt":1.*"launcher":"standby"' warm/events.jsonl || fail "warm: attempt 1 did not take over the standby"
grep -q '"event":"standby_started".*"parks_in":"pyrun"' warm/events.jsonl || fail "warm: the standby did not park in pyrun.py"

killed cold python_imports --no-standby
grep -q '"event":"attempt_start".*"attempt":1.*"launcher":"mpirun"' cold/events.jsonl || fail "cold: attempt 1 was not a cold start"

# A Python program that calls ftl.init() (examples/torch-lora) also runs through pyrun.py, but its
# cold restart's ranks are not told the last attempt's imports: they meet in ftl.init() first, and a
# rank waiting for rank 0's TCPStore before starting the program would wait for a rank 0 that
# waits for it (5 s lost on every restart).
ftl run -n 2 --no-standby --max-restarts 2 --run-dir lib -- "$TL_TRAIN" --steps 400 --ckpt-every 10 --step-ms 40 \
  >lib.out 2>&1 &
pid=$!
wait_for_event lib python_imports lib.out
victim=$(rank_pid lib "$TL_TRAIN" 1)
[ -n "$victim" ] || { cat lib.out >&2; fail "lib: rank 1 not found"; }
kill -KILL "$victim"
for _ in $(seq 1 200); do [ -n "$(gang_pids lib "$TL_TRAIN" 1 1)" ] && break; sleep 0.05; done
p1=$(gang_pids lib "$TL_TRAIN" 1 1 | head -1)
[ -n "$p1" ] || { cat lib.out >&2; fail "lib: attempt 1's rank 1 not found"; }
tr '\0' '\n' <"/proc/$p1/environ" | grep -qx 'FTL_PRELOAD=' ||
  fail "lib: a program that calls ftl.init() was given the last attempt's imports ($(tr '\0' '\n' <"/proc/$p1/environ" | grep FTL_PRELOAD | cut -c1-80))"
kill -INT $pid
wait_rc $pid
expect_no_leftovers
echo ok
