# tests/fault/ft_standby.sh MODE: the standby gang (warm restarts, docs/fault-tolerance.md) on the
# example fine-tune, 4 ranks. Every mode that ends in a finished job checks the adapter is
# byte-identical to a failure-free run's and that nothing of the job is left running.
#   takeover        a random rank of the running attempt is SIGKILLed once a standby is parked and a
#                   checkpoint committed: the standby takes over; then the same again on the new
#                   standby (two failures in a row, two take-overs)
#   parked_killed   a parked standby rank is SIGKILLed: the job is not disturbed (no failure, one
#                   attempt) and a new standby parks
#   during_takeover a running rank is killed, and a rank of the standby as soon as it is activated:
#                   a failure during the take-over is one more restart
#   sigterm_parked  SIGTERM to ftl while a standby is parked: both gangs stop, exit 75, nothing
#                   left; `ftl run` again resumes and finishes
#   early_exit      a program whose standby ranks exit before ftl_init: the standby is given up
#                   after 3 tries (no endless loop) and the job finishes on its first attempt
#   parked_cost     a parked rank: no file under the run directory, no CPU, memory flat and below a
#                   running rank's
#   fence           a process of attempt 0 outlives the take-over (started outside the gang with
#                   attempt 0's identity, so ftl cannot end it) and then tries to checkpoint the newest
#                   step attempt 1 committed: the fence refuses it, and that step still verifies
MODE=${1:?usage: ft_standby.sh MODE}
FT_STEPS=${FT_STEPS:-120}
. "$(dirname "$0")/ft_lib.sh" || exit 1
[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
RUN=runs/sb

# start_sb [YAML lines...]: the job in the background, slow enough for a standby to park first.
start_sb() {
  write_job job.yaml sb 4 "restart: {max_restarts: 4, backoff_s: 0.1}" "$@"
  sed -i 's/"--throttle-ms", "30"/"--throttle-ms", "50"/' job.yaml
  ftl run job.yaml >out 2>&1 &
  pid=$!
}

# wait_parked ATTEMPT: until a standby for ATTEMPT has parked (60 s at most).
wait_parked() {
  for _ in $(seq 1 600); do
    grep '"event":"standby_parked"' "$RUN/events.jsonl" 2>/dev/null | grep -q "\"attempt\":$1[,}]" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat out >&2
  fail "no standby parked for attempt $1"
}

# events_of EVENT ATTEMPT: how many EVENT records of ATTEMPT the log holds.
events_of() { grep "\"event\":\"$1\"" "$RUN/events.jsonl" | grep -c "\"attempt\":$2[,}]" || true; }

finish_ok() {
  wait_rc $pid
  expect_rc 0 out
  same_adapter ref-4/final "$RUN/final"
  verify_all "$RUN"
  expect_no_leftovers
}

# kill_running RANK: SIGKILLs RANK of the running attempt; its pid in $killed.
kill_running() {
  killed=$(rank_pid "$RUN" "$MARKER" "$1" ftl-finetune)
  [ -n "$killed" ] || { cat out >&2; fail "rank $1 of the running attempt not found"; }
  kill -KILL "$killed"
  echo "killed rank $1 of attempt $(current_attempt "$RUN") (pid $killed)"
}

case $MODE in
takeover)
  reference 4
  start_sb
  wait_first_commit "$RUN"
  wait_parked 1
  kill_running $((RANDOM % 4))
  wait_parked 2
  [ "$(events_of standby_activated 1)" -eq 1 ] || fail "attempt 1 did not take over the standby"
  kill_running $((RANDOM % 4))
  finish_ok
  [ "$(events_of standby_activated 2)" -eq 1 ] || fail "attempt 2 did not take over the standby"
  grep '"event":"attempt_start"' "$RUN/events.jsonl" | grep -c '"launcher":"standby"' | grep -qx 2 ||
    fail "expected two warm attempt starts"
  expect_contains "$RUN/attempt-0002/rank-00000.out" "resumed from the checkpoint of step"
  grep -o "restart cost R = [0-9.]* s" out
  ;;
parked_killed)
  reference 4
  start_sb
  wait_parked 1
  victim=$(standby_pid "$RUN" "$MARKER" $((RANDOM % 4)) ftl-finetune)
  [ -n "$victim" ] || fail "no parked standby rank found"
  kill -KILL "$victim"
  for _ in $(seq 1 300); do [ "$(events_of standby_parked 1)" -ge 2 ] && break; sleep 0.1; done
  [ "$(events_of standby_parked 1)" -ge 2 ] || { cat out >&2; fail "no new standby parked after the first one lost a rank"; }
  finish_ok
  grep -q '"event":"standby_lost".*"died":true' "$RUN/events.jsonl" || fail "the standby's loss is not in the event log"
  grep -q '"event":"failure"' "$RUN/events.jsonl" && fail "a parked standby's death failed the attempt"
  [ -d "$RUN/attempt-0001" ] && fail "the job was restarted"
  ;;
during_takeover)
  reference 4
  start_sb
  wait_first_commit "$RUN"
  wait_parked 1
  spare=$(standby_pid "$RUN" "$MARKER" $((RANDOM % 4)) ftl-finetune)
  [ -n "$spare" ] || fail "no parked standby rank found"
  kill_running $((RANDOM % 4))
  for _ in $(seq 1 400); do grep -q '"event":"standby_activated"' "$RUN/events.jsonl" && break; sleep 0.005; done
  kill -KILL "$spare"
  finish_ok
  [ "$(grep -c '"event":"failure"' "$RUN/events.jsonl")" -ge 2 ] || fail "the failure during the take-over was not seen"
  ;;
sigterm_parked)
  reference 4
  start_sb
  wait_first_commit "$RUN"
  wait_parked 1
  kill -TERM $pid
  wait_rc $pid
  expect_rc 75 out
  expect_no_leftovers
  grep -q '"event":"standby_lost"' "$RUN/events.jsonl" || fail "the standby's stop is not in the event log"
  run_ftl again.out run job.yaml
  expect_rc 0 again.out
  expect_contains again.out "resumed from the checkpoint of step"
  same_adapter ref-4/final "$RUN/final"
  expect_no_leftovers
  ;;
early_exit)
  cat >early.sh <<'SH'
#!/bin/sh
# A program that cannot start as a standby (it exits before ftl_init): ftl must give up on it.
[ "$FTL_STANDBY" = 1 ] && { echo "early.sh: not starting as a standby" >&2; exit 3; }
exec ftl-finetune "$@"
SH
  chmod +x early.sh
  write_job job.yaml sb 4 "restart: {max_restarts: 4, backoff_s: 0.1}"
  sed -i "s|^program: .*|program: $SCRATCH/early.sh|; s/\"--steps\", \"$FT_STEPS\"/\"--steps\", \"400\"/; s/\"--throttle-ms\", \"30\"/\"--throttle-ms\", \"40\"/" job.yaml
  run_ftl out run job.yaml
  expect_rc 0 out
  [ "$(count_events "$RUN" standby_started)" -eq 3 ] || { grep standby "$RUN/events.jsonl" >&2; fail "expected 3 standby starts"; }
  grep -q '"event":"standby_disabled"' "$RUN/events.jsonl" || fail "the standby was not turned off"
  expect_contains out "standby turned off for this run"
  expect_contains out "not starting as a standby"
  [ -d "$RUN/attempt-0001" ] && fail "a standby's early exit restarted the job"
  expect_no_leftovers
  ;;
parked_cost)
  start_sb
  wait_parked 1
  sb=$(standby_pid "$RUN" "$MARKER" 0 ftl-finetune)
  active=$(rank_pid "$RUN" "$MARKER" 0 ftl-finetune)
  [ -n "$sb" ] && [ -n "$active" ] || fail "ranks not found"
  cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  rss() { awk '{print $2 * 4}' "/proc/$1/statm"; }
  c0=$(cpu "$sb") r0=$(rss "$sb")
  sleep 2
  c1=$(cpu "$sb") r1=$(rss "$sb") ra=$(rss "$active")
  echo "parked rank: $((c1 - c0)) ticks of CPU in 2 s, RSS $r0 -> $r1 KiB; running rank RSS $ra KiB"
  [ $((c1 - c0)) -le 3 ] || fail "a parked rank used $((c1 - c0)) ticks of CPU in 2 s"
  [ $((r1 - r0)) -le 256 ] || fail "a parked rank grew from $r0 to $r1 KiB"
  [ "$r1" -lt "$ra" ] || fail "a parked rank ($r1 KiB) holds more than a running one ($ra KiB)"
  ls -l /proc/"$sb"/fd | grep -F "$(readlink -f "$RUN")" && fail "a parked rank holds a file of the run open"
  [ -d "$RUN/attempt-0001" ] && fail "the standby made its attempt folder before activation"
  grep -q '"event":"standby_parked".*"rss_kb":[1-9]' "$RUN/events.jsonl" || fail "standby_parked does not say its memory"
  wait_rc $pid
  expect_rc 0 out
  expect_no_leftovers
  ;;
fence)
  reference 4
  start_sb
  wait_first_commit "$RUN"
  wait_parked 1
  victim=$(rank_pid "$RUN" "$MARKER" 0 ftl-finetune)
  [ -n "$victim" ] || fail "rank 0 not found"
  # The ghost: attempt 0's identity (its run directory and attempt number), no token, its own
  # session: the sweep and the agents never reach it.
  ghost_env=$(tr '\0' '\n' <"/proc/$victim/environ" | grep -E '^(FTL_RUN_DIR|FTL_ATTEMPT|PATH|LD_LIBRARY_PATH|HOME)=')
  grep -qx "FTL_ATTEMPT=0" <<<"$ghost_env" || fail "rank 0 is not attempt 0's"
  # Its exit code is its verdict: no leak check at its exit (an MPI singleton's leaks, and LSan's
  # tracer that sometimes crashes there, are not what this test is about).
  env -i $ghost_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LSAN_OPTIONS="${LSAN_OPTIONS:-}" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" TSAN_OPTIONS="${TSAN_OPTIONS:-}" \
    setsid "$FTL_BIN_DIR/fence_ghost" --go-file go >ghost.out 2>&1 &
  ghost=$!
  kill_running 0
  for _ in $(seq 1 600); do grep -q '"event":"standby_activated"' "$RUN/events.jsonl" && break; sleep 0.05; done
  # The newest step attempt 1 committed (it may have committed none yet: then the newest of all).
  for _ in $(seq 1 200); do
    s1=$(grep '"event":"ckpt_committed"' "$RUN/events.jsonl" | grep '"attempt":1[,}]' | tail -1 | grep -o '"step":[0-9]*' | cut -d: -f2)
    [ -n "$s1" ] && break
    sleep 0.05
  done
  [ -n "$s1" ] || s1=$(committed_steps "$RUN" | sort -n | tail -1)
  kill -0 $ghost 2>/dev/null || { cat ghost.out >&2; fail "the ghost is gone before the take-over"; }
  # Written whole, then renamed: the ghost starts as soon as the name exists, and a file the shell
  # has created but not yet written would read as empty.
  echo "$s1" >go.tmp && mv go.tmp go
  wait $ghost
  grc=$?
  cat ghost.out
  [ $grc -eq 0 ] || fail "the old attempt's process was not fenced (exit $grc)"
  expect_contains ghost.out "attempt 0 was superseded by attempt"
  finish_ok
  ftl ckpt verify "$RUN" "$s1" >/dev/null 2>&1 || [ ! -d "$RUN/checkpoints/step-$(printf %08d "$s1")" ] ||
    fail "step $s1 no longer verifies after the ghost's try"
  ;;
*) fail "unknown mode $MODE" ;;
esac
echo "ok"
