# A rank killed by a signal: ftl names the rank and the signal.
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out run -n 2 --max-restarts 0 --run-dir run -- gang_probe --kill-rank 1 --marker "$MARKER"
expect_rc 1 out
expect_contains out "rank 1 on host $(hostname -s) was killed by signal 9 (SIGKILL)"
expect_no_leftovers
echo "ok"
