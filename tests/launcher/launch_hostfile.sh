# A hostfile run: ranks are placed by Open MPI from the hostfile (here this machine, 4 slots),
# MASTER_ADDR is the hostfile's first host, and the rendezvous is reached by this host's name.
. "$(dirname "$0")/lib.sh" || exit 1
printf '# one host\nlocalhost slots=4\n' > hosts.txt
run_ftl out run -n 4 --hostfile hosts.txt --run-dir run -- gang_probe --check-env --marker "$MARKER"
expect_rc 0 out
[ "$(grep -c -- '-> ok' out)" -eq 4 ] || { cat out; fail "expected 4 ranks with matching variables"; }
expect_contains out "master=localhost:"
grep '"event":"attempt_start"' run/events.jsonl | grep -q '"--hostfile","[^"]*/attempt-0000/hostfile"' ||
  fail "mpirun was not given the attempt's hostfile"
expect_contains run/attempt-0000/hostfile "localhost slots=4"
expect_no_leftovers
echo "ok"
