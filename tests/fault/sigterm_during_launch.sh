# SIGTERM while the gang is still forming (a requeue's scancel, a drain) is a clean stop: the ranks
# not yet through the rendezvous are ended at once and ftl exits 75 ("requeue me") within a couple of
# seconds, not after the kill grace with 143 while training went on. Two moments: rank 0 waiting in
# the rendezvous for rank 1, which sleeps before ftl_init; and at once, while mpirun is still placing
# the gang (an mpirun that takes 2 s to start, first on PATH, makes that moment last).
. "$(dirname "$0")/lib.sh" || exit 1

# stop_after RUNDIR WAIT_FOR_JOIN: starts the job, sends SIGTERM, checks exit 75 within 3 s.
stop_after() {
  local dir=$1 wait_join=$2
  ftl run -n 2 --run-dir "$dir" --kill-grace-ms 20000 -- gang_probe --no-init-rank 1 --marker "$MARKER" >"$dir.out" 2>&1 &
  local pid=$!
  if [ "$wait_join" = 1 ]; then
    for _ in $(seq 1 200); do
      grep -q '"event":"rank_joined"' "$dir/events.jsonl" 2>/dev/null && break
      sleep 0.05
    done
    grep -q '"event":"rank_joined"' "$dir/events.jsonl" 2>/dev/null || fail "rank 0 never joined the rendezvous"
  else
    sleep 0.3
    grep -q '"event":"rank_started"' "$dir/events.jsonl" 2>/dev/null && fail "an agent started before the slow mpirun did"
  fi
  local t0 t1
  t0=$(date +%s%N)
  kill -TERM $pid
  wait $pid
  RC=$?
  t1=$(date +%s%N)
  expect_rc 75 "$dir.out"
  expect_contains "$dir.out" "before the gang formed"
  local ms=$(((t1 - t0) / 1000000))
  echo "stopped $ms ms after SIGTERM ($dir)"
  [ "$ms" -lt 3000 ] || fail "the stop took $ms ms (goal: under 3 s; the kill grace is 20 s)"
  grep -q '"outcome":"preempted"' "$dir/events.jsonl" || fail "attempt not recorded as preempted"
  [ "$(ledger_count "$dir/failures.jsonl")" -eq 0 ] || fail "a stop before the gang formed is not a failure"
  expect_no_leftovers
}

stop_after in-rendezvous 1
real_mpirun=$(command -v mpirun) || fail "no mpirun"
mkdir slow-bin
printf '#!/bin/sh\nsleep 2\nexec %s "$@"\n' "$real_mpirun" > slow-bin/mpirun
chmod +x slow-bin/mpirun
PATH="$PWD/slow-bin:$PATH" stop_after at-once 0
echo "ok"
