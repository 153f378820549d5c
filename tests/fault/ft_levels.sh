# tests/fault/ft_levels.sh MODE: the checkpoints' L1 level (host memory, docs/checkpoint.md "Levels")
# on the example fine-tune, 4 ranks, the L1 folder in the scratch folder. Every mode ends with an
# adapter byte-identical to a failure-free run's and every committed checkpoint verifying.
#   kill      a rank is SIGKILLed after a commit: the restarted gang restores from L1 (every rank's
#             ckpt_restored event says l1)
#   damaged   the job is killed with its restart off; then one L1 copy gets a flipped byte, one is
#             cut short and one deleted: the relaunch restores those shards from the run directory,
#             naming each copy and what was wrong with it, and the intact one from L1
#   gone      the same kill, then the whole L1 folder removed (a new boot): the relaunch restores
#             from the run directory (l3)
#   hostile   the same kill, then the run's L1 folder replaced by a link to a copy of it (another
#             user could plant one in a shared /dev/shm): L1 is refused for the run, with a warning,
#             and the relaunch restores from the run directory
#   full      the L1 folder is a 64 KiB tmpfs: no room for a copy, the job runs on with a warning
#             and restores from the run directory (skipped where a tmpfs cannot be mounted)
MODE=${1:?usage: ft_levels.sh MODE}
FT_STEPS=${FT_STEPS:-60}
. "$(dirname "$0")/ft_lib.sh" || exit 1
[ -n "${SOAK_SEED:-}" ] && RANDOM=$SOAK_SEED
RUN=runs/lv
L1=$SCRATCH/l1
mkdir -p "$L1"

if [ "$MODE" = full ]; then
  mount -t tmpfs -o size=64k ftl-test-tiny "$L1" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
  trap 'umount "$L1" 2>/dev/null; pkill -KILL -f "$MARKER" 2>/dev/null; remove_scratch' EXIT
fi

# job RESTARTS: the job spec, L1 in $L1, no standby (the restore is what this test watches).
job() {
  write_job job.yaml lv 4 "restart: {max_restarts: $1, standby: off}" "checkpoint: {levels: [l1, l3], l1_dir: $L1}"
  sed -i 's/"--throttle-ms", "30"/"--throttle-ms", "50"/' job.yaml
}

# kill_after_commit: the job started in the background; a rank SIGKILLed after a commit.
kill_after_commit() {
  ftl run job.yaml >out 2>&1 &
  pid=$!
  wait_first_commit "$RUN"
  sleep 0.3
  victim=$(rank_pid "$RUN" "$MARKER" $((RANDOM % 4)) ftl-finetune)
  [ -n "$victim" ] || { cat out >&2; fail "no rank to kill"; }
  kill -KILL "$victim"
  wait_rc $pid
}

# levels_of ATTEMPT: the level each rank of ATTEMPT restored from, sorted, one line.
levels_of() {
  grep '"event":"ckpt_restored"' "$RUN/events.jsonl" | grep "\"attempt\":$1[,}]" | grep -o '"level":"[^"]*"' |
    cut -d'"' -f4 | sort | tr '\n' ' '
}

# newest_l1: the L1 folder of the run directory's newest committed step. Not the newest L1 folder:
# the kill can land while a later step is being saved, whose L1 folder is then partly written (a
# slow machine makes that likely), and the restore passes over that step anyway.
newest_l1() {
  local s
  s=$(committed_steps "$RUN" | sort -n | tail -1)
  [ -n "$s" ] && ls -d "$L1"/ftl-*/"$(printf 'step-%08d' "$((10#$s))")" 2>/dev/null | tail -1
}

reference 4
case $MODE in
kill)
  job 2
  kill_after_commit
  expect_rc 0 out
  [ "$(levels_of 1)" = "l1 l1 l1 l1 " ] || { grep ckpt_restored "$RUN/events.jsonl" >&2; fail "attempt 1 did not restore from L1: $(levels_of 1)"; }
  expect_contains "$RUN/attempt-0001/rank-00000.err" "from L1 (host memory)"
  ;;
damaged|gone|hostile)
  job 0
  kill_after_commit
  expect_rc 1 out
  step_dir=$(newest_l1)
  [ -n "$step_dir" ] || fail "no L1 copy was kept"
  step=$(basename "$step_dir")
  [ -f "$RUN/checkpoints/$step/manifest.json" ] || fail "the L1 copy $step is not the run directory's committed step"
  if [ "$MODE" = damaged ]; then
    flip_middle_byte "$step_dir/shard-00001.h5"
    truncate -s 1000 "$step_dir/shard-00000.h5"
    rm "$step_dir/shard-00002.h5"
  elif [ "$MODE" = hostile ]; then
    run_l1=$(dirname "$step_dir")
    cp -a "$run_l1" "$SCRATCH/planted"
    rm -rf "$run_l1"
    ln -s "$SCRATCH/planted" "$run_l1"
  else
    rm -rf "$L1"/ftl-*
  fi
  run_ftl again.out run job.yaml
  expect_rc 0 again.out
  if [ "$MODE" = damaged ]; then
    expect_contains again.out "shard-00001.h5 failed verification"
    expect_contains again.out "shard-00000.h5 has 1000 bytes"
    expect_contains again.out "shard-00002.h5 is gone"
    grep -q '"level":"l1+l3"\|"level":"l3"' "$RUN/events.jsonl" || fail "no rank fell back to the run directory"
  elif [ "$MODE" = hostile ]; then
    expect_contains again.out "is not a private folder of this user: not a folder (a link?)"
    [ "$(levels_of 1)" = "l3 l3 l3 l3 " ] || fail "a planted L1 folder was read: $(levels_of 1)"
    ls "$SCRATCH"/planted/step-*/shard-00000.h5 >/dev/null 2>&1 || fail "ftl deleted files through the planted link"
  else
    [ "$(levels_of 1)" = "l3 l3 l3 l3 " ] || fail "after the L1 folder was gone: $(levels_of 1)"
  fi
  ;;
full)
  job 2
  kill_after_commit
  expect_rc 0 out
  expect_contains out "no L1 copy of this rank's shard"
  [ "$(levels_of 1)" = "l3 l3 l3 l3 " ] || fail "with no room in L1: $(levels_of 1)"
  ;;
*) fail "unknown mode $MODE" ;;
esac
same_adapter ref-4/final "$RUN/final"
verify_all "$RUN"
expect_no_leftovers
echo "ok"
