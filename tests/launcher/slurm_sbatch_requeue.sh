# examples/slurm/finetune.sbatch as a real batch job on a private Slurm cluster (slurm_lib.sh):
# submitted with sbatch, warned mid-run the way `--signal=B:USR1@60` warns it (`scancel --signal=USR1
# --batch`: the batch shell alone gets USR1 and passes it to ftl), ftl checkpoints and exits 75, the
# script requeues the job, and the requeued job resumes in the same run directory and completes.
# The adapter must be byte-identical to an unbroken run's, the second launcher must start only
# after the first ended (events.jsonl: run_start/run_end with pids and times; RUNDIR/ftl.lock), and
# the ranks ran under srun. Then the same job is requeued by hand with `scontrol requeue` (SIGTERM to
# every process of the job): it must still complete with the same adapter, without overlap.
. "$(dirname "$0")/slurm_lib.sh" || exit 1
. "$FTL_SOURCE_DIR/tests/finetune/lib.sh" || exit 1
SBATCH_SCRIPT=$FTL_SOURCE_DIR/examples/slurm/finetune.sbatch
[ -x "$SBATCH_SCRIPT" ] || fail "$SBATCH_SCRIPT is missing"

run_ftl ref.out run -n 2 --progress off --run-dir ref -- ftl-finetune "${FT_ARGS[@]}" --ckpt-every 5
expect_rc 0 ref.out

# The same training as a job spec, slowed so the warning lands mid-run.
ARGS=("${FT_ARGS[@]}" --ckpt-every 5 --throttle-ms 120)
cat >job.yaml <<YAML
name: sbatch-finetune
ranks: 2
program: ftl-finetune
args: [$(printf '"%s", ' "${ARGS[@]}" | sed 's/, $//')]
YAML
# sbatch's own options override the script's #SBATCH lines (one node, 2 tasks here).
JOBID=$(sbatch --parsable -N 1 -n 2 --chdir="$PWD" --output="$PWD/slurm-%j.out" "$SBATCH_SCRIPT" "$PWD/job.yaml" "$PWD/sb") ||
  fail "sbatch failed"
JOBID=${JOBID%%;*}
job_state() { scontrol show job "$JOBID" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# Warn it once a checkpoint is committed (and well before the last step).
for _ in $(seq 600); do
  grep -q '"event":"ckpt_committed"' sb/events.jsonl 2>/dev/null && break
  sleep 0.05
done
grep -q '"event":"ckpt_committed"' sb/events.jsonl 2>/dev/null ||
  { cat slurm-*.out; scontrol show job "$JOBID"; fail "no checkpoint committed in the batch job"; }
scancel --signal=USR1 --batch "$JOBID" || fail "scancel --signal=USR1 --batch failed"
# The requeued job runs again and completes.
# Slurm holds a requeued batch job for about two minutes (its BeginTime); the test lets it start
# sooner (release_requeued). The first run's end may show briefly as FAILED (exit 75) before the
# requeue takes it back, so the job is done when the second launcher wrote its run_end and Slurm
# says it completed.
#
# release_requeued: once the requeued job is pending and the node finished cleaning up the first run
# (sinfo: idle), and 3 s after that was first seen: slurmd refuses to launch a job id whose
# credential it revoked (the kill) within the same second or so ("Job N already killed, do not
# launch batch job"), which is what Slurm's own delay protects against. Sets released=1.
pending_since=""
release_requeued() {
  [ $released = 0 ] && [ "$state" = PENDING ] || return 0
  scontrol show job "$JOBID" | grep -q 'Restarts=1' && sinfo -h -o %t | grep -qx idle || return 0
  [ -n "$pending_since" ] || pending_since=$SECONDS
  [ $((SECONDS - pending_since)) -ge 3 ] || return 0
  scontrol update JobId="$JOBID" StartTime=now || fail "cannot release the requeued job"
  released=1
}
state=""
released=0
for _ in $(seq 900); do
  state=$(job_state)
  release_requeued
  [ "$(grep -c '"event":"run_end"' sb/events.jsonl 2>/dev/null)" -ge 2 ] && [ "$state" = COMPLETED ] && break
  sleep 0.1
done
[ "$state" = COMPLETED ] || { cat slurm-*.out; scontrol show job "$JOBID"; fail "the batch job ended $state, expected COMPLETED"; }
scontrol show job "$JOBID" | grep -q 'Restarts=1' || { scontrol show job "$JOBID"; fail "expected one requeue (Restarts=1)"; }
expect_contains "slurm-$JOBID.out" "requeueing job $JOBID"
same_adapter ref/final sb/final
python3 - sb/events.jsonl <<'PY' || { cat "slurm-$JOBID.out"; fail "the launchers' events are wrong"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
starts = [e for e in ev if e["event"] == "run_start"]
ends = [e for e in ev if e["event"] == "run_end"]
assert len(starts) == 2 and len(ends) == 2, (len(starts), len(ends))
assert [e["exit_code"] for e in ends] == [75, 0], [e["exit_code"] for e in ends]
# Never two launchers at once: the first ended before the second started, and they are two processes.
assert ends[0]["t_us"] <= starts[1]["t_us"], "the second launcher started before the first ended"
assert starts[0]["t_us"] < ends[0]["t_us"] and starts[1]["t_us"] < ends[1]["t_us"]
assert starts[0]["pid"] != starts[1]["pid"] or starts[0]["host"] != starts[1]["host"]
outcomes = [e["outcome"] for e in ev if e["event"] == "attempt_end"]
assert outcomes == ["preempted", "succeeded"], outcomes
assert all(e["launcher"] == "srun" for e in ev if e["event"] == "attempt_start")
restored = [e for e in ev if e["event"] == "ckpt_restored"]
assert restored and restored[0]["step"] > 0, restored
PY
# The lock: free now, and its record says the last launcher released it.
python3 - sb/ftl.lock <<'PY' || fail "the run directory lock was not released"
import json, sys
rec = json.load(open(sys.argv[1]))
assert rec.get("released_wall_us"), rec
PY
ftl status sb >status.txt || fail "ftl status failed"
expect_contains status.txt "state: ended: exit code 0"
expect_contains status.txt "preempted"

# A requeue forced by hand (`scontrol requeue`, as a preemption with PreemptMode=REQUEUE does):
# Slurm sends SIGTERM to every process of the job at once, ranks included. The requeued job must
# still complete with the same adapter, and never overlap the first launcher.
JOBID2=$(sbatch --parsable -N 1 -n 2 --chdir="$PWD" --output="$PWD/slurm2-%j.out" "$SBATCH_SCRIPT" "$PWD/job.yaml" "$PWD/sb2") ||
  fail "sbatch failed"
JOBID2=${JOBID2%%;*}
for _ in $(seq 600); do
  grep -q '"event":"ckpt_committed"' sb2/events.jsonl 2>/dev/null && break
  sleep 0.05
done
scontrol requeue "$JOBID2" || fail "scontrol requeue failed"
JOBID=$JOBID2
released=0
pending_since=""
for _ in $(seq 900); do
  state=$(job_state)
  release_requeued
  [ $released = 1 ] && [ "$state" = COMPLETED ] && grep -q '"exit_code":0' <(grep '"event":"run_end"' sb2/events.jsonl) && break
  sleep 0.1
done
[ "$state" = COMPLETED ] || { cat slurm2-*.out; cat sb2/events.jsonl | grep -v '"rank"'; fail "after scontrol requeue the job ended $state"; }
same_adapter ref/final sb2/final
# The ranks die of Slurm's SIGTERM as ftl asks them to stop: the first launcher ends 143 (stopped
# without a clean stop of the ranks; 75 if the stop won the race), relaunches nothing inside the
# dying job, and the requeued launcher starts after it ended and resumes from the committed step.
python3 - sb2/events.jsonl <<'PY' || { cat slurm2-*.out; fail "after scontrol requeue: the launchers' events are wrong"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
starts = [e for e in ev if e["event"] == "run_start"]
ends = [e for e in ev if e["event"] == "run_end"]
assert len(starts) == 2 and len(ends) == 2, (len(starts), len(ends))
assert ends[0]["exit_code"] in (75, 143) and ends[1]["exit_code"] == 0, [e["exit_code"] for e in ends]
assert ends[0]["t_us"] <= starts[1]["t_us"], "the second launcher started before the first ended"
assert not [e for e in ev if e["event"] == "restart"], "ftl relaunched inside a job being requeued"
restored = [e for e in ev if e["event"] == "ckpt_restored"]
assert restored and restored[0]["step"] > 0, restored
PY
# A requeue is a preemption, not a failure: the ranks Slurm killed with the same SIGTERM must not
# enter the failure ledger, where they would lower the cadence's MTBF estimate.
if [ -f sb2/failures.jsonl ] && grep -q '"record":"failure"' sb2/failures.jsonl; then
  cat sb2/failures.jsonl >&2
  fail "scontrol requeue was recorded as a failure"
fi
expect_no_leftovers
echo ok
