# tests/fault/ft_level_steps.sh MODE: each level at its own cadence (docs/checkpoint.md, "Each level
# at its own cadence") on the example fine-tune, 4 ranks on one host, the L1 folder in the scratch
# folder: checkpoints every 7 steps, those at multiples of 21 in the run directory (L3), the others
# (--ckpt-l3-every) only in host memory (L1). Rank 1 is SIGKILLed while it writes step 35 (an L1
# step), so the newest committed step is step 28, committed at L1 only. Every mode ends with an
# adapter byte-identical to a failure-free run's and every committed L3 step verifying.
#   kill     the launcher restarts the gang: every rank restores step 28 from L1 (ckpt_restored
#            says l1), and step 28 was never written to the run directory
#   gone     the job stops (restart off); the L1 folder is removed (a new boot); the relaunch falls
#            back to the newest L3 step, 21
#   corrupt  the job stops; one shard's L1 copy of step 28 gets a flipped byte; the relaunch names
#            the copy and its level and falls back to step 21 from the run directory
MODE=${1:?usage: ft_level_steps.sh MODE}
FT_STEPS=${FT_STEPS:-60}
. "$(dirname "$0")/ft_lib.sh" || exit 1
RUN=runs/lvs
L1=$SCRATCH/l1
mkdir -p "$L1"

# job RESTARTS: L1 in $L1, no standby, the L3 checkpoints every 21 steps, rank 1 killed in step 35.
job() {
  write_job job.yaml lvs 4 "restart: {max_restarts: $1, standby: off}" "checkpoint: {levels: [l1, l3], l1_dir: $L1}" \
    "env: {FTL_BACKEND: mpi, FTL_CRASH_AT: after_shard_rename, FTL_CRASH_STEP: \"35\", FTL_CRASH_RANK: \"1\"}"
  sed -i '/^env: {FTL_BACKEND: mpi}$/d' job.yaml
  ckpt_l3_every job.yaml 21
}

# restored_of ATTEMPT: "STEP:LEVEL" of each rank's ckpt_restored event in ATTEMPT, sorted, one line.
restored_of() {
  grep '"event":"ckpt_restored"' "$RUN/events.jsonl" | grep "\"attempt\":$1[,}]" |
    sed 's/.*"step":\([0-9]*\).*"level":"\([^"]*\)".*/\1:\2/' | sort | tr '\n' ' '
}

reference 4
case $MODE in
kill)
  job 2
  run_ftl out run job.yaml
  expect_rc 0 out
  expect_contains out "was killed by signal 9"
  [ "$(restored_of 1)" = "28:l1 28:l1 28:l1 28:l1 " ] ||
    { grep ckpt_restored "$RUN/events.jsonl" >&2; fail "attempt 1 did not restore step 28 from L1: $(restored_of 1)"; }
  grep '"event":"ckpt_committed"' "$RUN/events.jsonl" | grep '"step":28,' | grep -q '"level":"l1"' ||
    fail "step 28 was not committed at l1"
  grep '"event":"ckpt_committed"' "$RUN/events.jsonl" | grep '"step":21,' | grep -q '"level":"l3"' ||
    fail "step 21 was not committed at l3"
  [ ! -e "$RUN/checkpoints/step-00000028" ] || fail "an L1 step was written to the run directory"
  ;;
gone|corrupt)
  job 0
  run_ftl out run job.yaml
  expect_rc 1 out
  l1_step=$(ls -d "$L1"/ftl-*/step-00000028 2>/dev/null)
  [ -n "$l1_step" ] && [ -f "$l1_step/manifest.json" ] || fail "step 28 is not committed in L1"
  grep -q '"levels": \["l1"\]' "$l1_step/manifest.json" || { cat "$l1_step/manifest.json" >&2; fail "step 28's manifest does not say l1"; }
  [ ! -e "$RUN/checkpoints/step-00000028" ] || fail "an L1 step was written to the run directory"
  # ftl ckpt ls shows the L1 step beside the run directory's, with its level.
  FTL_CKPT_L1_DIR=$L1 ftl ckpt ls "$RUN" >ls.out 2>&1 || { cat ls.out >&2; fail "ftl ckpt ls failed"; }
  grep -Eq '^28 +committed +4 .* l1 +in this host.s memory' ls.out || { cat ls.out >&2; fail "ftl ckpt ls does not show step 28 at l1"; }
  grep -Eq '^21 +committed +4 .* (l1\+)?l3 ' ls.out || { cat ls.out >&2; fail "ftl ckpt ls does not show step 21 at l3"; }
  if [ "$MODE" = gone ]; then
    rm -rf "$L1"/ftl-*
  else
    flip_middle_byte "$l1_step/shard-00001.h5"
  fi
  run_ftl again.out run job.yaml
  expect_rc 0 again.out
  [ "$(restored_of 1)" = "21:l3 21:l3 21:l3 21:l3 " ] ||
    { grep ckpt_restored "$RUN/events.jsonl" >&2; fail "the relaunch did not restore step 21 from L3: $(restored_of 1)"; }
  if [ "$MODE" = corrupt ]; then
    expect_contains again.out "step-00000028/shard-00001.h5 failed verification"
    expect_contains again.out "the step has no other copy (saved at l1)"
    expect_contains again.out "step 28 (saved below L3, in the hosts' memory) cannot be restored"
  fi
  ;;
*) fail "unknown mode $MODE" ;;
esac
same_adapter ref-4/final "$RUN/final"
verify_all "$RUN"
expect_no_leftovers
echo "ok"
