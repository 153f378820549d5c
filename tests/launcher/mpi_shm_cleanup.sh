# Open MPI's shared-memory files (btl vader in 4.x, sm in 5.x) do not pile up in /dev/shm as gangs
# are killed. Each rank's file goes in a folder its agent makes (launcher/agent.c make_sm_dir) and
# removes once the program has ended; an agent killed before it could is swept by the next agent
# that starts on the host. So what a SIGKILLed launcher's gang (whose mpirun never gets to its own
# cleanup) or a gang with a SIGKILLed rank leaves is gone once the next gang is up. A backing
# folder the user set is left to the user.
. "$(dirname "$0")/lib.sh" || exit 1
[ -d /dev/shm ] || { echo "SKIP: no /dev/shm"; exit 77; }

# agent_pids [active]: the pids of this test's rank agents now running (mpirun's children; not the
# host's relay, which an agent forks), with "active" those of the running attempt only (not a parked
# standby gang's, whose programs wait before MPI_Init).
agent_pids() {
  local p
  for p in $(pgrep -f "rank-agent -- .*$MARKER"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = ftl-rank-agent ] || continue
    [ "$(cat /proc/"$(awk '{print $4}' /proc/$p/stat 2>/dev/null)"/comm 2>/dev/null)" = mpirun ] || continue
    [ "${1:-}" = active ] && tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx FTL_STANDBY=1 && continue
    echo "$p"
  done
}

# sm_dir PID: the shared-memory folder of the agent PID, or nothing.
sm_dir() { ls -d /dev/shm/ftl-mpi-sm-n*-p"$1"-s*-r* 2>/dev/null; }

# wait_ready RUNDIR N: until N ranks of the run in RUNDIR are past MPI_Init.
wait_ready() {
  for _ in $(seq 1 300); do
    [ "$(count_events "$1" rank_ready)" -ge "$2" ] 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$2 ranks of $1 were not ready within 30 s"
}

# expect_segments AGENTS: each agent has its folder, and Open MPI's segment is in it.
expect_segments() {
  local a d
  for a in $1; do
    d=$(sm_dir "$a")
    [ -n "$d" ] || fail "rank agent $a has no shared-memory folder under /dev/shm"
    ls "$d" | grep -qE '^(vader|sm)_segment\.' || fail "no Open MPI segment in $d: $(ls -A "$d")"
  done
}

# wait_gone [killed PID]: until no process of the test runs (30 s at most), then none may. After a
# launcher PID that was SIGKILLed, its mpirun's session folder (core/owned_dir.h) is still in its
# TMPDIR, named for it, until the next launcher sweeps it; otherwise nothing may be left there.
wait_gone() {
  for _ in $(seq 1 300); do
    pgrep -f "$MARKER" >/dev/null || break
    sleep 0.1
  done
  if [ "${1:-}" = killed ]; then
    pgrep -f "$MARKER" >/dev/null && fail "processes of the job are still running"
    # One for its attempt's mpirun, and one for its standby's if that was up.
    killed_base=$(ls -d "$SCRATCH"/tmp/ftl-mpirun-n*-p"$2"-* 2>/dev/null)
    [ -n "$killed_base" ] || fail "no session folder named for the SIGKILLed launcher $2: $(ls -A "$SCRATCH/tmp")"
  else
    expect_no_leftovers
  fi
}

# expect_base_swept WHAT: the killed launcher's session folder is gone.
expect_base_swept() {
  local b
  for b in $killed_base; do
    [ ! -e "$b" ] || fail "$1: $b is still there"
  done
}

# expect_swept AGENTS WHAT: none of the (ended) agents' folders is left.
expect_swept() {
  local a
  for a in $1; do
    [ -z "$(sm_dir "$a")" ] || fail "$2: the folder $(sm_dir "$a") of rank agent $a is still there"
  done
}

# 1. The launcher SIGKILLed while its 3 ranks run: mpirun and the agents are torn down.
ftl run -n 3 --run-dir run1 -- gang_probe --sleep-ms 60000 --marker "$MARKER" >run1.out 2>&1 &
launcher=$!
wait_ready run1 3
active=$(agent_pids active)
[ "$(echo $active | wc -w)" -eq 3 ] || fail "expected 3 rank agents in the attempt, found: $active"
expect_segments "$active"
gone1=$(agent_pids) # with the standby gang's, if it is up
kill -KILL $launcher
wait $launcher 2>/dev/null
wait_gone killed $launcher

# 2. One rank's program SIGKILLed; the gang ends (no restarts).
ftl run -n 3 --run-dir run2 --max-restarts 0 -- gang_probe --sleep-ms 60000 --marker "$MARKER" >run2.out 2>&1 &
launcher=$!
wait_ready run2 3
expect_swept "$gone1" "once the next gang was up, after a SIGKILLed launcher"
expect_base_swept "once the next launcher was up"
expect_segments "$(agent_pids active)"
gone2=$(agent_pids)
victim=$(rank_pid run2 "$MARKER" 1 gang_probe)
[ -n "$victim" ] || fail "rank 1's program not found"
kill -KILL "$victim"
wait_rc $launcher
[ "$RC" -ne 0 ] || { cat run2.out >&2; fail "a run whose rank was killed, with no restarts, exited 0"; }
wait_gone

# 3. A backing folder the user chose: the agents make none, and the program sees the user's.
mkdir user-shm
OMPI_MCA_btl_vader_backing_directory=$PWD/user-shm OMPI_MCA_btl_sm_backing_directory=$PWD/user-shm \
  ftl run -n 2 --run-dir run3 -- gang_probe --sleep-ms 60000 --marker "$MARKER" >run3.out 2>&1 &
launcher=$!
wait_ready run3 2
expect_swept "$gone2" "once the next gang was up, after a SIGKILLed rank"
for a in $(agent_pids); do
  [ -z "$(sm_dir "$a")" ] || fail "rank agent $a made a folder although the user set one"
done
prog=$(rank_pid run3 "$MARKER" 0 gang_probe)
tr '\0' '\n' <"/proc/$prog/environ" | grep -qx "OMPI_MCA_btl_vader_backing_directory=$PWD/user-shm" ||
  fail "the program did not get the user's backing folder"
ls user-shm | grep -qE '^(vader|sm)_segment\.' || fail "no Open MPI segment in the user's folder: $(ls -A user-shm)"
kill -KILL $launcher # a SIGTERM would give the sleeping ranks their grace
wait $launcher 2>/dev/null
wait_gone killed $launcher
# The next run on the host, however short, leaves nothing of either.
ftl run -n 1 --run-dir run4 -- gang_probe --marker "$MARKER" >run4.out 2>&1 || { cat run4.out >&2; fail "run4 failed"; }
expect_base_swept "after the next run"
wait_gone
echo "PASS"
