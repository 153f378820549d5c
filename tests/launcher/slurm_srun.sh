# Inside a Slurm allocation ftl launches with srun: a private Slurm cluster (munged, slurmctld and
# one slurmd, all on this machine, on free ports, in the scratch folder) is started, then
# `salloc -n 4 ftl run ...` must start 4 ranks through srun with the right variables, and a rank
# exiting 3 must be named. Skipped (77) when Slurm is not installed.
. "$(dirname "$0")/lib.sh" || exit 1
for b in slurmctld slurmd salloc munged; do
  command -v "$b" >/dev/null || { echo "skipped: $b is not installed"; exit 77; }
done
D=$SCRATCH/slurm
mkdir -p "$D/munge" "$D/spool" "$D/state" "$D/log"
chmod 755 "$SCRATCH" "$D" "$D/munge"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ctl_port=$(free_port)
d_port=$(free_port)
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$D/munge/munge.key"
cat >"$D/slurm.conf" <<CONF
ClusterName=ftltest
SlurmctldHost=localhost
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=ftln1 NodeAddr=127.0.0.1 Port=$d_port CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=ftln1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$D/slurm.conf
stop_slurm() {
  for f in "$D"/slurmd.*.pid "$D/slurmctld.pid" "$D/munge/munged.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.3
}
trap 'stop_slurm; pkill -KILL -f "$MARKER" 2>/dev/null; rm -rf "$SCRATCH"' EXIT
munged --key-file="$D/munge/munge.key" --socket="$D/munge/munge.sock" --pid-file="$D/munge/munged.pid" \
  --log-file="$D/log/munged.log" --seed-file="$D/munge/seed" || fail "munged did not start"
slurmctld || fail "slurmctld did not start"
slurmd -N ftln1 || fail "slurmd did not start"
for _ in $(seq 1 50); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.2
done
sinfo -h -o %t | grep -q idle || { cat "$D/log/slurmctld.log" >&2; fail "the Slurm node did not come up"; }

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
