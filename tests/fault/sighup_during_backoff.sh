# SIGHUP to ftl while it waits out the back-off before a restart: nothing is running, so ftl stops
# at once and exits 143 (docs/cli.md: "stopped by SIGTERM or SIGHUP"), not 130 (that is SIGINT's).
. "$(dirname "$0")/lib.sh" || exit 1
probe_job job.yaml hup 2 "--steps 20 --step-ms 10 --fail-rank 0 --fail-step 2 --save-every 0" \
  "restart: {max_restarts: 5, backoff_s: 30, max_backoff_s: 30, crash_loop: 10}"
ftl run job.yaml >out 2>&1 &
pid=$!
wait_for_event runs/hup restart out
sleep 0.3
kill -HUP $pid
wait_rc $pid
expect_rc 143 out
expect_contains out "during the back-off"
[ ! -d runs/hup/attempt-0001 ] || fail "a second attempt was started after SIGHUP"
expect_no_leftovers
echo "ok"
