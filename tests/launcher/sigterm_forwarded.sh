# SIGTERM to ftl reaches every rank (also a plain program and its children); ftl exits 143 and
# nothing of the job is left.
. "$(dirname "$0")/lib.sh" || exit 1
ftl run -n 2 --run-dir run --kill-grace-ms 2000 -- /bin/sh -c "sleep 300 # $MARKER" >out 2>&1 &
pid=$!
# Both agents up (mpirun's and the agents' own command lines carry the marker too): a SIGTERM
# while the gang is still being placed is a clean stop (75, tests/fault/sigterm_during_launch.sh).
for _ in $(seq 1 100); do
  [ "$(grep -c '"event":"rank_started"' run/events.jsonl 2>/dev/null)" -ge 2 ] && [ "$(pgrep -fc "sleep 300 # $MARKER")" -ge 2 ] && break
  sleep 0.1
done
[ "$(pgrep -fc "sleep 300 # $MARKER")" -ge 2 ] || fail "ranks did not start"
kill -TERM $pid
wait_rc $pid
expect_rc 143 out
expect_contains out "stopped by SIGTERM"
expect_no_leftovers
echo "ok"
