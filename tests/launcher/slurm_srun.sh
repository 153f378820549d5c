# Inside a Slurm allocation ftl launches with srun: a private Slurm cluster (munged, slurmctld and
# one slurmd, all on this machine, on free ports, in the scratch folder) is started, then
# `salloc -n 4 ftl run ...` must start 4 ranks through srun with the right variables, and a rank
# exiting 3 must be named. Skipped (77) when Slurm is not installed. The cluster: slurm_lib.sh.
. "$(dirname "$0")/slurm_lib.sh" || exit 1

timeout 60 salloc -n 4 ftl run -n 4 --run-dir run -- gang_probe --check-env --marker "$MARKER" >out 2>&1
RC=$?
expect_rc 0 out
[ "$(grep -c -- '-> ok' out)" -eq 4 ] || { cat out; fail "expected 4 ranks with matching variables under srun"; }
grep '"event":"attempt_start"' run/events.jsonl | grep -q '"launcher":"srun"' || fail "ftl did not use srun inside the allocation"

timeout 60 salloc -n 4 ftl run -n 4 --max-restarts 0 --run-dir run2 -- gang_probe --exit-rank 2 --code 3 --marker "$MARKER" >out2 2>&1
RC=$?
expect_rc 1 out2
expect_contains out2 "rank 2 on host $(hostname -s) exited with code 3"
expect_no_leftovers
echo "ok"
