# Signals as a terminal user meets them: `ftl run ... | head -1` (stdout closed early) runs the job to
# its end and writes run_end; Ctrl-C under `| tee` (tee dies first, then ftl gets SIGINT) stops the
# ranks cleanly at their next step: exit 130, one line per rank, no failure recorded, run_end
# written, and the same command again resumes from the step the stop saved.
. "$(dirname "$0")/lib.sh" || exit 1

# run_end_code RUNDIR: the exit code the run's last run_end event records, or nothing.
run_end_code() { grep '"event":"run_end"' "$1/events.jsonl" 2>/dev/null | tail -1 | sed 's/.*"exit_code":\([0-9]*\).*/\1/'; }

# | head -1: the reader is gone after one line; the launcher goes on, its writes dropped.
(ftl run -n 2 --run-dir head -- fault_probe --steps 40 --step-ms 20 --marker "$MARKER" 2>&1; echo $? >head.rc) | head -1 >head.out
for _ in $(seq 1 300); do [ -s head.rc ] && break; sleep 0.1; done
[ "$(cat head.rc)" = 0 ] || fail "ftl run | head -1 exited $(cat head.rc), not 0"
[ "$(run_end_code head)" = 0 ] || fail "no run_end with exit code 0 after | head -1"
grep -q '"event":"attempt_end".*"outcome":"succeeded"' head/events.jsonl || fail "the job did not run to its end under | head -1"

# Ctrl-C under tee: tee dies first (SIGKILL: gone at once), then ftl gets SIGINT.
# The probe runs until it is stopped, or until $SCRATCH/enough exists (the resumed run below).
PROBE=(fault_probe --steps 100000 --step-ms 20 --save-every 5 --until-file "$SCRATCH/enough" --marker "$MARKER")
(ftl run -n 2 --run-dir int -- "${PROBE[@]}" 2>&1; echo $? >int.rc) | tee tee.out >/dev/null &
for _ in $(seq 1 300); do [ "$(count_events int first_step)" -ge 2 ] && break; sleep 0.1; done
[ "$(count_events int first_step)" -ge 2 ] || fail "the job under tee did not start"
sleep 0.5
tee_pid=$(pgrep -f "tee tee.out" | head -1)
launcher=$(pgrep -f "ftl run -n 2 --run-dir int" | head -1)
[ -n "$tee_pid" ] && [ -n "$launcher" ] || fail "tee or the launcher not found"
kill -KILL "$tee_pid"
sleep 0.2
kill -INT "$launcher"
for _ in $(seq 1 300); do [ -s int.rc ] && break; sleep 0.1; done
[ "$(cat int.rc 2>/dev/null)" = 130 ] || fail "Ctrl-C under tee: ftl exited '$(cat int.rc 2>/dev/null)', not 130"
[ "$(run_end_code int)" = 130 ] || fail "Ctrl-C under tee: no run_end with exit code 130"
! grep -q '"record":"failure"' int/failures.jsonl 2>/dev/null || { cat int/failures.jsonl >&2; fail "Ctrl-C was recorded as a failure"; }
grep -q "first failure" int/events.jsonl tee.out && fail "Ctrl-C was logged as a rank's failure"
grep '"event":"attempt_end"' int/events.jsonl | grep -q '"outcome":"preempted"' || fail "the ranks did not stop cleanly"
saved=$(cat int/probe-step)
[ "${saved:-0}" -gt 0 ] || fail "the stop saved no step"
grep -q '"event":"signal".*"name":"SIGINT"' int/events.jsonl || fail "no SIGINT in the event log"
# The same command again resumes where the stop saved (the probe's own checkpoint), and ends.
touch "$SCRATCH/enough"
run_ftl again.out run -n 2 --run-dir int -- "${PROBE[@]}"
expect_rc 0 again.out
expect_contains again.out "probe: attempt 1 starts at step $saved of 100000"
expect_no_leftovers
echo ok
