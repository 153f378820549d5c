# tests/launcher/pyrun.sh: launcher/pyrun.py runs a Python program as a fresh interpreter would, and
# a standby parked in it runs none of the program's own code before its activation (issue 34).
#  1. The same probes run by the interpreter itself and through pyrun.py (no launcher socket: the
#     path an activated standby and a cold rank take) print the same thing: sys.argv, __file__,
#     sys.path[0], the working folder, __main__'s names, __spec__, __loader__; a script that raises
#     and one that fails at import give the same traceback and exit code; `-m pkg.mod` the same
#     module view; a KeyboardInterrupt ends the process by SIGINT as Python's own does. A standby's
#     runner without its agent's socket ends rather than run the program outside an attempt.
#  2. Under `ftl run` (one rank, a restart allowed) a program that writes a file when it starts: the
#     standby parks in pyrun.py (standby_parked), the file still has one line (the standby ran none
#     of the program's code), the rank is killed, the standby takes over (attempt 1 "launcher":
#     "standby"), the program sees the attempt's FTL_ATTEMPT and not FTL_STANDBY, the file has its
#     second line, and the job ends 0. python_runner and python_imports are in the event log.
# Also: a program ftl cannot run through pyrun.py (`python3 -c`) says why in python_runner.
. "$(dirname "$0")/lib.sh" || exit 1
PY=/usr/bin/python3
RUNNER=$FTL_BIN_DIR/../share/ftl/pyrun.py
[ -f "$RUNNER" ] || fail "no $RUNNER in the build"

mkdir -p work/pkg
cat >work/probe.py <<'PY'
import json, os, sys
main = sys.modules["__main__"]
view = {"argv": sys.argv, "file": __file__, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
        "globals": sorted(globals()), "spec": repr(__spec__), "loader": type(__loader__).__name__,
        "main_is_module": main.__dict__ is globals(), "package": __package__,
        "env": sorted(k for k in os.environ if k.startswith("FTL_PY") or k == "FTL_PRELOAD")}
print(json.dumps(view, sort_keys=True))
if "raise" in sys.argv:
    def inner():
        raise ValueError("probe failed on purpose")
    inner()
if "interrupt" in sys.argv:
    raise KeyboardInterrupt
if "exit3" in sys.argv:
    sys.exit(3)
PY
echo 'import no_such_module_for_ftl_test' >work/importfail.py
touch work/pkg/__init__.py
cat >work/pkg/mod.py <<'PY'
import json, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__, "spec": __spec__.name,
                  "package": __package__, "file": __file__}, sort_keys=True))
PY
cd work
compare() { # compare LABEL ARGS...: the interpreter's own run and pyrun.py's print and end the same
  local label=$1 rc_fresh rc_run
  shift
  "$PY" "$@" >../fresh.out 2>../fresh.err
  rc_fresh=$?
  if [ "$1" = "-m" ]; then "$PY" "$RUNNER" "$@" >../run.out 2>../run.err; else "$PY" "$RUNNER" "$@" >../run.out 2>../run.err; fi
  rc_run=$?
  [ "$rc_fresh" = "$rc_run" ] || { cat ../fresh.err ../run.err >&2; fail "$label: exit $rc_fresh fresh, $rc_run through pyrun.py"; }
  cmp -s ../fresh.out ../run.out || { diff ../fresh.out ../run.out >&2; fail "$label: stdout differs"; }
  cmp -s ../fresh.err ../run.err || { diff ../fresh.err ../run.err >&2; fail "$label: stderr differs"; }
  echo "$label: same (exit $rc_run)"
}
compare "a script" probe.py a b
compare "a script by ./path" ./probe.py c
compare "a script by absolute path" "$PWD/probe.py"
compare "a script that raises" probe.py raise
compare "sys.exit(3)" probe.py exit3
compare "a KeyboardInterrupt" probe.py interrupt
compare "a failed import" importfail.py
compare "-m pkg.mod" -m pkg.mod x y
# A standby's runner without its agent's socket must not run the program outside an attempt.
FTL_STANDBY=1 "$PY" "$RUNNER" probe.py >../lone.out 2>../lone.err && fail "a standby runner without its socket ran"
[ ! -s ../lone.out ] || fail "a standby runner without its socket ran the program: $(cat ../lone.out)"
grep -q "cannot park" ../lone.err || fail "a standby runner without its socket did not say why it ended"
cd ..

# 2. Under ftl run: the standby parks in pyrun.py without running the program's code.
cat >writes.py <<'PY'
import json, os, sys, time
with open(sys.argv[1], "a") as f:  # at start-up: a standby must not do this before its activation
    f.write(f"{os.getpid()} attempt={os.environ.get('FTL_ATTEMPT')} standby={os.environ.get('FTL_STANDBY')}\n")
deadline = time.time() + float(sys.argv[2])
while time.time() < deadline:
    time.sleep(0.05)
PY
ftl run -n 1 --max-restarts 1 --standby --run-dir run -- "$PY" writes.py "$SCRATCH/starts.txt" 25 "$MARKER" >ftl.out 2>&1 &
FTL_PID=$!
wait_for_event run standby_parked ftl.out
grep -q '"event":"python_runner".*"used":true' run/events.jsonl || fail "no python_runner event saying the runner is used"
grep -q '"event":"python_imports"' run/events.jsonl || fail "no python_imports event"
grep -q '"event":"standby_started".*"parks_in":"pyrun"' run/events.jsonl || fail "the standby does not park in pyrun.py"
run_ftl status.out status run
expect_contains status.out "in ftl's Python runner"
sleep 1
[ "$(wc -l <starts.txt)" -eq 1 ] || { cat starts.txt >&2; fail "the parked standby ran the program's start-up"; }
victim=$(rank_pid run writes.py 0 python3)
[ -n "$victim" ] || fail "rank 0's program not found"
kill -KILL "$victim"
# The take-over: the second line within seconds, not after a cold start.
for _ in $(seq 1 100); do [ "$(wc -l <starts.txt)" -ge 2 ] && break; sleep 0.05; done
[ "$(wc -l <starts.txt)" -eq 2 ] || { cat starts.txt >&2; fail "the standby did not run the program once activated"; }
grep -q '"event":"attempt_start".*"attempt":1.*"launcher":"standby"' run/events.jsonl || fail "attempt 1 did not take over the standby"
sed -n 2p starts.txt | grep -q "attempt=1 standby=None" || { cat starts.txt >&2; fail "the activated program's environment is not the attempt's"; }
kill -TERM $FTL_PID
wait_rc $FTL_PID

# A Python program pyrun.py cannot run says why, and runs as it is.
run_ftl c.out run -n 1 --max-restarts 1 --run-dir runc -- "$PY" -c "print('hello from -c')"
expect_rc 0 c.out
expect_contains c.out "hello from -c"
grep -q '"event":"python_runner".*"used":false.*-c' runc/events.jsonl || fail "python_runner does not say why -c runs as it is"
expect_no_leftovers
echo ok
