# tests/launcher/slurm_lib.sh: a private Slurm cluster for a test: munged, slurmctld and one slurmd
# (node ftln1, 8 CPUs), all on this machine, on free ports, with their state and logs in the test's
# scratch folder, stopped when the test exits. Sourced after lib.sh by the Slurm tests
# (slurm_srun.sh, slurm_sbatch_requeue.sh); sets SLURM_CONF and SLURM_DIR. Exits 77 (skipped) when
# Slurm or munge is not installed.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" || exit 1
for b in slurmctld slurmd salloc sbatch scontrol munged; do
  command -v "$b" >/dev/null || { echo "skipped: $b is not installed"; exit 77; }
done
SLURM_DIR=$SCRATCH/slurm
D=$SLURM_DIR
mkdir -p "$D/munge" "$D/spool" "$D/state" "$D/log" "$D/tmp"
chmod 755 "$SCRATCH" "$D" "$D/munge"
slurm_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ctl_port=$(slurm_free_port)
d_port=$(slurm_free_port)
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$D/munge/munge.key"
# TmpFS: the mpi/pmix plugin makes each step's folder there (spmix_appdir_UID_JOB.STEP): under /tmp,
# the default, two tests' clusters (slurm_srun beside slurm_sbatch_requeue) both number their first
# job 1 and shared it, and a step failed to launch ("task 0 launch failed"; flake hunt, 1 in 120).
# KillWait: the grace between a job's SIGTERM and its SIGKILL (scancel, scontrol requeue).
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
TmpFS=$D/tmp
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
KillWait=10
JobRequeue=1
SchedulerParameters=sched_interval=1
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
trap 'stop_slurm; pkill -KILL -f "$MARKER" 2>/dev/null; remove_scratch' EXIT
munged --key-file="$D/munge/munge.key" --socket="$D/munge/munge.sock" --pid-file="$D/munge/munged.pid" \
  --log-file="$D/log/munged.log" --seed-file="$D/munge/seed" || fail "munged did not start"
slurmctld || fail "slurmctld did not start"
slurmd -N ftln1 || fail "slurmd did not start"
for _ in $(seq 1 50); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.2
done
sinfo -h -o %t | grep -q idle || { cat "$D/log/slurmctld.log" >&2; fail "the Slurm node did not come up"; }
