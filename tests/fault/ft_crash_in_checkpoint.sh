# A rank SIGKILLed while it writes its shard of step 14 (mid_shard), or while rank 0 writes the
# manifest (mid_manifest): the launcher restarts the gang, which resumes from step 7, the last
# commit; step 14 is written again; the adapter is byte-identical to a failure-free run, and
# every committed checkpoint left verifies.
#   ft_crash_in_checkpoint.sh mid_shard|mid_manifest
. "$(dirname "$0")/ft_lib.sh" || exit 1
AT=${1:?mid_shard or mid_manifest}
RANK=1
[ "$AT" = mid_manifest ] && RANK=0
reference 4
write_job job.yaml crash 4 "env: {FTL_BACKEND: mpi, FTL_CKPT_CRASH_AT: $AT, FTL_CKPT_CRASH_STEP: \"14\", FTL_CKPT_CRASH_RANK: \"$RANK\"}"
sed -i '/^env: {FTL_BACKEND: mpi}$/d' job.yaml
run_ftl out run job.yaml
expect_rc 0 out
expect_contains out "rank $RANK on host $(hostname -s) was killed by signal 9"
expect_contains runs/crash/attempt-0001/rank-00000.out "resumed from the checkpoint of step 7"
same_adapter ref-4/final runs/crash/final
verify_all runs/crash
expect_no_leftovers
echo "ok"
