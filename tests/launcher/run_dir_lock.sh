# One launcher per run directory (RUNDIR/ftl.lock, docs/formats/ftl-lock.md): a second `ftl run` on
# a run directory in use is refused (exit 2) naming the holder's pid and host, and the first
# completes; --wait-lock waits for it instead; a SIGKILLed launcher's lock is taken over with a note;
# a command-line job is not run into another job's run directory. Each part has a run directory of
# its own (one run directory is one job: docs/formats/job-identity.md).
. "$(dirname "$0")/lib.sh" || exit 1
host=$(hostname -s)

# wait_started DIR: until the launcher in DIR has started its ranks.
wait_started() { wait_for_event "$1" rank_started; }

# Two at once: the second is refused, naming the first; the first completes.
ftl run -n 2 --run-dir run -- gang_probe --sleep-ms 3000 --marker "$MARKER" >first.out 2>&1 &
first=$!
wait_started run
run_ftl second.out run -n 1 --run-dir run -- gang_probe --sleep-ms 3000 --marker "$MARKER"
expect_rc 2 second.out
expect_contains second.out "is in use: its lock"
expect_contains second.out "held by pid $first on host $host (job 'gang_probe', since "
wait $first
RC=$?
expect_rc 0 first.out
[ "$(ls -d run/attempt-* | wc -l)" -eq 1 ] || fail "the refused launcher started an attempt"
grep -q '"released_wall_us"' run/ftl.lock || fail "the lock's record was not marked released"

# --wait-lock: the second waits for the first and then takes the lock (the job being finished by
# then, it says so and starts nothing).
ftl run -n 2 --run-dir run2 -- gang_probe --sleep-ms 1500 --marker "$MARKER" >first.out 2>&1 &
first=$!
wait_started run2
run_ftl second.out run -n 2 --run-dir run2 --wait-lock 60 -- gang_probe --sleep-ms 1500 --marker "$MARKER"
wait $first
expect_rc 0 second.out
expect_contains second.out "waiting up to 60.0 s for it"
expect_contains second.out "already finished: job 'gang_probe' trained to its end"
run_ftl bad.out run -n 1 --run-dir run --wait-lock soon -- gang_probe
expect_rc 2 bad.out
expect_contains bad.out "--wait-lock: expected seconds >= 0, got 'soon'"

# A launcher killed with SIGKILL: the kernel drops its flock; the next takes the lock over. It is
# killed once its own 2 ranks are ready (past MPI_Init). The run directory's event log already
# holds the earlier launchers' events, so waiting for any rank_started let the kill land mid
# start-up; ranks then ended inside MPI_Init leave mpirun's PMIx server waiting
# ("PMIX ERROR: UNREACHABLE"), and the orphaned mpirun outlived the test by seconds.
ftl run -n 2 --run-dir run3 -- gang_probe --sleep-ms 60000 --until-file "$SCRATCH/wake" --marker "$MARKER" >killed.out 2>&1 &
killed=$!
for _ in $(seq 1 300); do
  [ "$(count_events run3 rank_ready)" -ge 2 ] && break
  sleep 0.1
done
[ "$(count_events run3 rank_ready)" -ge 2 ] || { cat killed.out >&2; fail "the launcher to be killed did not have its 2 ranks ready within 30 s"; }
kill -KILL $killed
wait $killed 2>/dev/null
touch "$SCRATCH/wake" # the same job again, without its minute of sleep
run_ftl after.out run -n 2 --run-dir run3 -- gang_probe --sleep-ms 60000 --until-file "$SCRATCH/wake" --marker "$MARKER"
expect_rc 0 after.out
expect_contains after.out "taking over the lock of pid $killed on host $host"
for _ in $(seq 1 100); do pgrep -f "sleep-ms 60000 --until-file $SCRATCH/wake --marker $MARKER" >/dev/null || break; sleep 0.1; done

# A command-line job into a spec job's run directory.
cat > job.yaml <<YAML
name: specjob
ranks: 1
program: gang_probe
YAML
run_ftl spec.out run job.yaml
expect_rc 0 spec.out
run_ftl cli.out run -n 1 --run-dir runs/specjob -- gang_probe
expect_rc 2 cli.out
expect_contains cli.out "belongs to the job 'specjob' of spec job.yaml (spec hash "
expect_contains cli.out "this is the command-line job 'gang_probe' (gang_probe)"
[ ! -d runs/specjob/attempt-0001 ] || fail "the refused command-line job started an attempt"
expect_no_leftovers
echo "ok"
