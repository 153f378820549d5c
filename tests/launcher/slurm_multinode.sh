# ftl inside a real Slurm allocation across several nodes: a private cluster of 3 nodes, each a
# network namespace with its own host name and address (slurm_lib.sh, SLURM_NODES), takes the
# example batch script (examples/slurm/finetune.sbatch) as `sbatch -N 3 --ntasks-per-node=2`. ftl
# runs in the batch step on the first node and must start its 6 ranks through srun, 2 on each node
# (each rank's host in events.jsonl), every rank reaching the launcher by its host name; then a rank
# exiting 3 on the second node must be named with that node's host name. Then `salloc` from the
# login node: MASTER_ADDR names the node of rank 0, not the launcher's host. Skipped (77) when Slurm
# or network namespaces cannot be had.
SLURM_NODES=3
. "$(dirname "$0")/slurm_lib.sh" || exit 1
SBATCH_SCRIPT=$FTL_SOURCE_DIR/examples/slurm/finetune.sbatch
[ -x "$SBATCH_SCRIPT" ] || fail "$SBATCH_SCRIPT is missing"
N1=$(slurm_node_name 1)
N2=$(slurm_node_name 2)
N3=$(slurm_node_name 3)

# probe_spec FILE ARGS...: a job spec of 6 gang_probe ranks with those arguments.
probe_spec() {
  local f=$1
  shift
  printf 'name: multinode\nranks: 6\nprogram: gang_probe\nargs: %s\n' "$(yaml_list "$@" --marker "$MARKER")" >"$f"
}

# submit SPEC RUNDIR [FTL RUN OPTIONS...]: the example batch script on 3 nodes, 2 tasks each, until
# the job ends (60 s at most); the batch script's exit code in $RC, its output in RUNDIR.out. Not
# `sbatch --wait`: it looks at the job every 2, 4, 8... s, and that wait was most of the test.
submit() {
  local spec=$1 rd=$2 id state=""
  shift 2
  id=$(sbatch --parsable -N 3 -n 6 --ntasks-per-node=2 --chdir="$PWD" --output="$PWD/$rd.out" \
    "$SBATCH_SCRIPT" "$PWD/$spec" "$PWD/$rd" "$@") || fail "sbatch failed"
  for _ in $(seq 600); do
    state=$(scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case "$state" in PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.1 ;; *) break ;; esac
  done
  case "$state" in COMPLETED | FAILED) ;; *)
    cat "$rd.out" >&2
    scontrol show job "$id" >&2
    fail "batch job $id ended $state, not COMPLETED or FAILED" ;;
  esac
  RC=$(scontrol show job "$id" | grep -o ' ExitCode=[0-9]*' | cut -d= -f2)
}

probe_spec ok.yaml --check-env
submit ok.yaml run
expect_rc 0 run.out
[ "$(grep -c -- '-> ok' run.out)" -eq 6 ] || { cat run.out; fail "expected 6 ranks with matching variables under srun"; }
# Where everything ran: ftl on the first node (the batch host), its ranks in srun's block order,
# ranks 0-1 on the first node, 2-3 on the second, 4-5 on the third.
/usr/bin/python3 - run/events.jsonl "$N1" "$N2" "$N3" <<'PY' || { cat run.out; fail "the ranks did not run where srun puts them"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
nodes = sys.argv[2:]
runs = [e for e in ev if e["event"] == "run_start"]
assert [e["host"] for e in runs] == [nodes[0]], ("ftl ran on", [e["host"] for e in runs])
starts = [e for e in ev if e["event"] == "attempt_start"]
assert starts and all(e["launcher"] == "srun" for e in starts), starts
hosts = {e["rank"]: e["host"] for e in ev if e["event"] == "rank_started"}
want = {r: nodes[r // 2] for r in range(6)}
assert hosts == want, ("rank hosts", hosts, "expected", want)
PY

# A rank failing on the second node is named with that node's host name.
probe_spec exit.yaml --exit-rank 2 --code 3
submit exit.yaml run2 --max-restarts 0
expect_rc 1 run2.out
expect_contains run2.out "rank 2 on host $N2 exited with code 3"

# salloc from the login node (this machine, no node of the cluster): ftl runs here, its ranks on the
# nodes, rank 0 on the first node of the plan, and MASTER_ADDR names that node, not the launcher's
# host (which the ranks' torch.distributed could not bind to).
timeout 60 salloc -N 3 --ntasks-per-node=2 ftl run -n 6 --run-dir run3 --max-restarts 0 -- \
  sh -c 'echo "MASTER_ADDR=$MASTER_ADDR host=$(hostname) rank=$RANK"' >out3 2>&1
RC=$?
expect_rc 0 out3
expect_contains run3/attempt-0000/rank-00000.out "MASTER_ADDR=$N1 host=$N1 rank=0"
expect_contains run3/attempt-0000/rank-00005.out "MASTER_ADDR=$N1 host=$N3 rank=5"
expect_contains run3/attempt-0000/hostfile "$N1 slots=2"
expect_no_leftovers
echo ok
