# A fine-tune that dies at the same point in every attempt (its step-14 checkpoint): after
# restart.crash_loop attempts ftl stops with a crash-loop report, and the committed checkpoint of
# step 7 is intact.
. "$(dirname "$0")/ft_lib.sh" || exit 1
write_job job.yaml loop 4 "env: {FTL_BACKEND: mpi, FTL_CKPT_CRASH_AT: mid_shard, FTL_CKPT_CRASH_STEP: \"14\", FTL_CKPT_CRASH_RANK: \"1\", FTL_CKPT_CRASH_ATTEMPT: any}" \
  "restart: {max_restarts: 10, crash_loop: 3}"
sed -i '/^env: {FTL_BACKEND: mpi}$/d' job.yaml
run_ftl out run job.yaml
expect_rc 1 out
expect_contains out "crash loop: 3 attempts in a row failed"
[ "$(ledger_count runs/loop/failures.jsonl)" -eq 3 ] || fail "expected 3 failures in the ledger"
committed_steps runs/loop | grep -qx 7 || fail "the committed checkpoint of step 7 is gone"
verify_all runs/loop
expect_no_leftovers
echo "ok"
