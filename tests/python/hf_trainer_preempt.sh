# tests/python/hf_trainer_preempt.sh: examples/hf-trainer preempted: SIGTERM to `ftl run` once a
# checkpoint is committed; ftl.hf.train's callback sees the stop request at the next step, commits
# that step and stops Trainer, the ranks exit 0 and `ftl run` exits 75 (requeue me), with no final
# adapter written. The same command again resumes from the commit and ends with the reference's
# adapter bytes (hf_trainer_lib.sh).
. "$(dirname "$0")/hf_trainer_lib.sh" || exit 1
CMD=(run -n 2 --run-dir pre -- "$HF_PY" "$HT_TRAIN" "${HT_ARGS[@]}" --step-ms 60)
ftl "${CMD[@]}" >pre.out 2>&1 &
pid=$!
for _ in $(seq 1200); do
  has_commit pre && break
  sleep 0.05
done
has_commit pre || { cat pre.out >&2; fail "no committed checkpoint after 60 s"; }
kill -TERM $pid
wait_rc $pid
expect_rc 75 pre.out
expect_contains pre/attempt-0000/rank-00000.out "checkpoint"
grep -h "exiting" pre/attempt-0000/rank-0000*.out
[ ! -e pre/final ] || fail "a preempted run wrote its final adapter"
run_ftl pre2.out "${CMD[@]}" # the same job, requeued
expect_rc 0 pre2.out
grep -rq "resumed from ftl checkpoint" pre/attempt-*/rank-00000.out || fail "the requeued job did not resume"
same_files refrun/ref/final pre/final "${HT_FILES[@]}"
expect_no_leftovers
echo ok
