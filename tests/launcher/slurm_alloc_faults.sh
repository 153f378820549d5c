# tests/launcher/slurm_alloc_faults.sh MODE: ftl inside a real multi-node Slurm allocation when
# things fail (issue 36). A private cluster of nodes, each a network namespace with its own host
# name and address (slurm_lib.sh, SLURM_NODES), runs the example batch script
# (examples/slurm/finetune.sbatch: --nodes=4 --ntasks-per-node=2 --no-kill --requeue) on the
# example fine-tune with 6 ranks: 3 nodes of training and, with 4 nodes, 1 spare. ftl plans each
# attempt on the allocation's nodes and places every rank with srun (attempt-NNNN/hostfile and its
# .tasks layout). MODE:
#   spare     node 3 is killed (kill_host: every process on it at once) after the first commit: ftl
#             names it lost, leaves it out, and the next attempt's srun runs on nodes 1, 2 and the
#             spare 4 at once (no wait for Slurm's own verdict on the node), resumes from the last
#             commit, and the adapter is byte-identical to an unbroken 6-rank run's
#   min_ranks 3 nodes, no spare, min_ranks 4: node 3 killed, the next attempt runs 4 ranks on nodes
#             1 and 2 from the last commit (resharded) and commits further; then node 2 is killed
#             and the job stops, naming the slots left (2) and the 4 ranks it needs
#   standby   node 3 killed as in spare; then, once a standby for attempt 2 is parked (srun --overlap
#             on the new plan: nodes 1, 2, 4), a rank on the former spare is SIGKILLed: the standby
#             takes over (a warm attempt on nodes 1, 2, 4), and the adapter is byte-identical
#   requeue   a preemption across the nodes (`scancel --signal=USR1 --batch`, as --signal=B:USR1@60
#             warns): ftl checkpoints, exits 75, the script requeues the job; the test releases it
#             from Slurm's hold (BeginTime, about 2 minutes) and the requeued job resumes and ends
#             with the adapter of an unbroken run; then `scontrol requeue` (SIGTERM to every process
#             of the job): the script must not requeue it a second time, and it still ends so
# Skipped (77) when Slurm or network namespaces cannot be had.
MODE=${1:?usage: slurm_alloc_faults.sh spare|min_ranks|standby|requeue}
SLURM_NODES=4
[ "$MODE" = min_ranks ] && SLURM_NODES=3
FT_STEPS=${FT_STEPS:-120}
. "$(dirname "$0")/slurm_lib.sh" || exit 1
. "$FTL_SOURCE_DIR/tests/fault/ft_lib.sh" || exit 1
SBATCH_SCRIPT=$FTL_SOURCE_DIR/examples/slurm/finetune.sbatch
[ -x "$SBATCH_SCRIPT" ] || fail "$SBATCH_SCRIPT is missing"
N1=$(slurm_node_name 1)
N2=$(slurm_node_name 2)
N3=$(slurm_node_name 3)
N4=$(slurm_node_name 4)
RUN=$PWD/runs/alloc
[ "$MODE" = min_ranks ] || reference 6

# A node's silence is noticed within timeouts.node_s; a killed node's agents' connections close at
# once, which is noticed sooner.
extra=("timeouts: {node_s: 5, startup_s: 60}" "rendezvous: {timeout_s: 30}" "restart: {max_restarts: 4, backoff_s: 0.1}")
[ "$MODE" = min_ranks ] && extra+=("min_ranks: 4")
write_job job.yaml alloc 6 "${extra[@]}"
# The standby must park before the job ends: the job outlasts it, its ranks holding before each step
# while $PWD/hold exists (the example's --hold-file), which the test makes once attempt 1 has taken
# its first step (the standby starts only then) and removes once the standby has parked.
[ "$MODE" = standby ] && sed -i "s|\"--throttle-ms\", \"30\"|\"--throttle-ms\", \"30\", \"--hold-file\", \"$PWD/hold\"|" job.yaml

JOBID=$(sbatch --parsable -N "$SLURM_NODES" --chdir="$PWD" --output="$PWD/slurm-%j.out" "$SBATCH_SCRIPT" \
  "$PWD/job.yaml" "$RUN") || fail "sbatch failed"
JOBID=${JOBID%%;*}
job_state() { scontrol show job "$JOBID" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
show() {
  local last f
  cat slurm-*.out >&2
  grep -E '"event":"(attempt_|failure|host_|restart|run_|standby_)' "$RUN/events.jsonl" >&2
  scontrol show job "$JOBID" >&2
  # The last attempt's ranks in their own words, and the nodes' Slurm errors (a step that never
  # started, PMIx).
  last=$(ls -d "$RUN"/attempt-* 2>/dev/null | tail -n 1)
  for f in "$last"/rank-*.err; do
    [ -f "$f" ] && { echo "== $f (its last 12 lines)"; tail -n 12 "$f"; }
  done >&2
  grep -H -i 'error' "$D"/log/slurmd.*.log 2>/dev/null | tail -n 40 >&2
}
wait_until_show() { show; } # wait_until's report (tests/launcher/lib.sh)
run_ends() { grep -c '"event":"run_end"' "$RUN/events.jsonl" 2>/dev/null || true; }
ftl_ended() { [ "$(run_ends)" -ge "${1:-1}" ]; }
# The exit code of the launcher's Nth run_end (1: the first).
ftl_rc() { grep '"event":"run_end"' "$RUN/events.jsonl" | sed -n "${1:-1}p" | grep -o '"exit_code":[0-9]*' | cut -d: -f2; }
committed_past() { [ "$(committed_steps "$RUN" | sort -n | tail -1)" -gt "$1" ]; }
attempt_started() { grep '"event":"attempt_start"' "$RUN/events.jsonl" 2>/dev/null | grep -q "\"attempt\":$1,"; }

# check_attempt ATTEMPT LAUNCHER NODES...: the attempt started with LAUNCHER (srun or standby), its
# ranks in block order, 2 on each of NODES; srun's steps share the allocation (--overlap).
check_attempt() {
  /usr/bin/python3 - "$RUN/events.jsonl" "$@" <<'PY' || { show; fail "attempt $1 did not run where the plan says"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
attempt, launcher, nodes = int(sys.argv[2]), sys.argv[3], sys.argv[4:]
start = [e for e in ev if e["event"] == "attempt_start" and e["attempt"] == attempt]
assert start and start[0]["launcher"] == launcher, start
if launcher == "srun":
    argv = start[0]["argv"]
    assert "--overlap" in argv and "--distribution=arbitrary" in argv, argv
    assert argv[argv.index("--nodes") + 1] == str(len(nodes)), argv
hosts = {e["rank"]: e["host"] for e in ev if e["event"] == "rank_started" and e["attempt"] == attempt}
want = {r: nodes[r // 2] for r in range(2 * len(nodes))}
assert hosts == want, ("attempt", attempt, "rank hosts", hosts, "expected", want)
PY
}

# kill_node_after_commit I: node I crashes once the run has a committed checkpoint.
kill_node_after_commit() {
  wait_until 60 "no committed checkpoint" has_commit "$RUN"
  kill_host "$1"
  echo "node $1 killed at step $(committed_steps "$RUN" | sort -n | tail -1) (committed)"
}

case "$MODE" in
  spare | standby)
    kill_node_after_commit 3
    if [ "$MODE" = standby ]; then
      # The next standby is started on attempt 1's plan (nodes 1, 2 and the spare 4) and parks.
      wait_until 60 "attempt 1 took no first step" grep -q '"event":"first_step","attempt":1' "$RUN/events.jsonl"
      touch hold
      wait_until 60 "no standby parked for attempt 2" grep -q '"event":"standby_parked","attempt":2' "$RUN/events.jsonl"
      rm -f hold
      wait_until 60 "attempt 1 committed nothing" committed_past "$(committed_steps "$RUN" | sort -n | tail -1)"
      victim=$(rank_pid "$RUN" "$MARKER" 5 ftl-finetune)
      [ -n "$victim" ] || { show; fail "rank 5 of attempt 1 not found"; }
      kill -KILL "$victim"
    fi
    wait_until 90 "ftl did not end" ftl_ended
    [ "$(ftl_rc)" = 0 ] || { show; fail "ftl ended $(ftl_rc), expected 0"; }
    expect_contains slurm-*.out "host $N3 is lost"
    expect_contains "$RUN/attempt-0001/hostfile" "# left out: $N3 slots=2"
    expect_contains "$RUN/attempt-0001/hostfile" "$N4 slots=2"
    check_attempt 0 srun "$N1" "$N2" "$N3"
    check_attempt 1 srun "$N1" "$N2" "$N4"
    if [ "$MODE" = standby ]; then
      check_attempt 2 standby "$N1" "$N2" "$N4"
      expect_contains slurm-*.out "attempt 2 takes over the standby gang"
    fi
    # The relaunch did not wait for Slurm (a step stuck on the dead node holds its CPUs until the
    # node is DOWN and beyond): it started well within a SlurmdTimeout of the failure.
    /usr/bin/python3 - "$RUN/events.jsonl" <<'PY' || { show; fail "the relaunch after the node loss was slow"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
fail_t = [e["t_us"] for e in ev if e["event"] == "failure" and e["attempt"] == 0][0]
start_t = [e["t_us"] for e in ev if e["event"] == "startup" and e["attempt"] == 1][0]
print("node loss detected -> attempt 1's first step: %.2f s" % ((start_t - fail_t) / 1e6))
assert start_t - fail_t < 10e6, (start_t - fail_t) / 1e6
restored = [e for e in ev if e["event"] == "ckpt_restored" and e["attempt"] == 1]
assert restored and restored[0]["step"] > 0, restored
PY
    grep -q "step creation temporarily disabled" slurm-*.out && { show; fail "a step waited for the allocation's CPUs"; }
    same_adapter ref-6/final "$RUN/final"
    verify_all "$RUN"
    ;;
  min_ranks)
    kill_node_after_commit 3
    wait_until 60 "attempt 1 did not start" attempt_started 1
    wait_until 60 "attempt 1 committed nothing" committed_past "$(committed_steps "$RUN" | sort -n | tail -1)"
    kill_host 2
    wait_until 90 "ftl did not end" ftl_ended
    [ "$(ftl_rc)" = 1 ] || { show; fail "ftl ended $(ftl_rc), expected 1"; }
    expect_contains slurm-*.out "continuing with 4 ranks instead of 6"
    expect_contains slurm-*.out "host $N2 is lost"
    expect_contains slurm-*.out "cannot go on: the hosts left hold 2 slots, fewer than the 4 ranks it needs (min_ranks)"
    expect_contains "$RUN/attempt-0001/hostfile" "# left out: $N3 slots=2"
    check_attempt 1 srun "$N1" "$N2"
    expect_contains "$RUN/attempt-0001/rank-00000.out" "(written by 6 ranks"
    grep -q '"event":"run_stopped".*"reason":"not enough hosts"' "$RUN/events.jsonl" || { show; fail "no run_stopped event"; }
    ;;
  requeue)
    # release_requeued: once the requeued job is pending, every node idle again, and 3 s after that
    # was first seen (slurmd refuses a job id whose credential it revoked within the same second or
    # so: slurm_sbatch_requeue.sh).
    release_requeued() {
      [ "$(job_state)" = PENDING ] && scontrol show job "$JOBID" | grep -q "Restarts=$1" || return 1
      [ "$(sinfo -h -N -o %t | grep -cvx idle)" = 0 ] || return 1
      [ -n "$pending_since" ] || pending_since=$SECONDS
      [ $((SECONDS - pending_since)) -ge 3 ] || return 1
      scontrol update JobId="$JOBID" StartTime=now || fail "cannot release the requeued job"
    }
    pending_since=""
    wait_until 60 "no committed checkpoint" has_commit "$RUN"
    scancel --signal=USR1 --batch "$JOBID" || fail "scancel --signal=USR1 --batch failed"
    wait_until 60 "ftl did not stop" ftl_ended 1
    [ "$(ftl_rc 1)" = 75 ] || { show; fail "the preempted launcher ended $(ftl_rc 1), expected 75"; }
    wait_until 60 "the requeued job was not released" release_requeued 1
    wait_until 60 "the requeued job did not start" attempt_started 1
    # Then Slurm's own requeue: SIGTERM to every process of the job, on every node.
    wait_until 60 "the requeued job committed nothing" committed_past "$(committed_steps "$RUN" | sort -n | tail -1)"
    requeue_us=$(($(date +%s%N) / 1000))
    scontrol requeue "$JOBID" || fail "scontrol requeue failed"
    wait_until 60 "ftl did not stop on scontrol requeue" ftl_ended 2
    pending_since=""
    wait_until 60 "the job requeued by Slurm was not released" release_requeued 2
    wait_until 90 "the third launcher did not end" ftl_ended 3
    [ "$(ftl_rc 3)" = 0 ] || { show; fail "the last launcher ended $(ftl_rc 3), expected 0"; }
    expect_contains slurm-*.out "requeueing job $JOBID"
    # Slurm's own requeue is never requeued a second time by the script.
    [ "$(grep -c "requeueing job $JOBID" slurm-*.out)" = 1 ] || { show; fail "the script requeued the job twice"; }
    /usr/bin/python3 - "$RUN/events.jsonl" "$requeue_us" "$N1" "$N2" "$N3" <<'PY' || { show; fail "the launchers' events are wrong"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
requeue_us, nodes = int(sys.argv[2]), sys.argv[3:]
ends = [e for e in ev if e["event"] == "run_end"]
starts = [e for e in ev if e["event"] == "run_start"]
assert ends[0]["exit_code"] == 75 and ends[1]["exit_code"] in (75, 143) and ends[2]["exit_code"] == 0, ends
for a, b in zip(ends, starts[1:]):
    assert a["t_us"] <= b["t_us"], "a launcher started before the previous one ended"
# Slurm's requeue signals the ranks on every node before ftl (the batch step): their deaths are no
# failure to restart from (run.c asks Slurm), and the ledger holds none.
taken = [e for e in ev if e["event"] == "restart" and requeue_us <= e["t_us"] <= ends[1]["t_us"]]
assert not taken, ("ftl relaunched inside a job being taken away", taken)
ledger = sys.argv[1].replace("events.jsonl", "failures.jsonl")
try:
    recs = [json.loads(l) for l in open(ledger) if l.strip()]
except FileNotFoundError:
    recs = []
bad = [r for r in recs if r.get("record") == "failure" and requeue_us <= r.get("wall_us", 0) <= ends[1]["t_us"]]
assert not bad, ("Slurm's requeue entered the failure ledger", bad)
for e in [e for e in ev if e["event"] == "attempt_start" and e.get("launcher") == "srun"]:
    hosts = {x["rank"]: x["host"] for x in ev if x["event"] == "rank_started" and x["attempt"] == e["attempt"]}
    assert hosts == {r: nodes[r // 2] for r in range(6)}, (e["attempt"], hosts)
restored = [e for e in ev if e["event"] == "ckpt_restored"]
assert len(restored) >= 2 and all(e["step"] > 0 for e in restored), restored
PY
    same_adapter ref-6/final "$RUN/final"
    ;;
  *) fail "unknown mode $MODE" ;;
esac
expect_no_leftovers
echo ok
