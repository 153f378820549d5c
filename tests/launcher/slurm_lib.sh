# tests/launcher/slurm_lib.sh: a private Slurm cluster for a test (munged, slurmctld, slurmd), all
# on this machine, on free ports, with its state and logs in the test's scratch folder, stopped when
# the test exits. Sourced by the Slurm tests; sets SLURM_CONF and SLURM_DIR. Exits 77 (skipped) when
# Slurm or munge is not installed, or, for several nodes, when network namespaces cannot be made.
# Two shapes, chosen by SLURM_NODES before sourcing:
# - unset or 0 (slurm_srun.sh, slurm_sbatch_requeue.sh): one slurmd, node ftln1 (8 CPUs), on
#   127.0.0.1 beside slurmctld; every rank runs under this machine's own host name.
# - N >= 1 (slurm_multinode.sh): N nodes, each a "host" of tests/fault/netns_lib.sh (a network
#   namespace with its own address $NET.I and host name), named by its host name (slurm_node_name
#   I), with a mount namespace of its own where /etc/hosts names every node (ranks reach the
#   launcher by its host name, as on a real cluster) and the steps' PMIx folder (TmpFS) is the
#   node's own. One slurmd per node, started as that host (`slurmd -N NAME`). slurmctld and munged
#   run on this machine, which joins the nodes' bridge at $NET.254 as the login node: sbatch,
#   scontrol, sinfo run here unchanged. SLURM_NODE_CPUS CPUs per node (default 4), partition
#   `debug` of them all. SLURM_CONF_EXTRA: lines appended to slurm.conf (a later line wins).
#   Helpers: slurm_on_node I CMD (run CMD on node I, as that host), slurm_node_start I (its slurmd,
#   again after a kill), slurm_wait_idle [S], and netns_lib.sh's kill_host I (node I crashes: every
#   process on it dies at once) and link_down I (its link is cut).
SLURM_NODES=${SLURM_NODES:-0}
SLURM_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slurm_lib.sh
# netns_lib.sh before lib.sh moves to the scratch folder: it finds lib.sh from the test's path.
if [ "$SLURM_NODES" -ge 1 ]; then . "$(dirname "$0")/../fault/netns_lib.sh" || exit 1; fi
. "${SLURM_LIB%/*}/lib.sh" || exit 1
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

# stop_slurm: every daemon and job of the cluster ends; for several nodes, with their namespaces
# (netns_down kills whatever runs in them) and this machine's end of their bridge.
stop_slurm() {
  if [ "$SLURM_NODES" -ge 1 ] && declare -F netns_down >/dev/null; then
    netns_down
    rm -f "$D"/slurmd.*.pid
    ip link del "ftlc$$" 2>/dev/null
  fi
  local f p pids=""
  for f in "$D"/slurmd.*.pid "$D/slurmctld.pid" "$D/munge/munged.pid"; do
    [ -f "$f" ] && pids="$pids $(cat "$f")"
  done
  # A step's slurmstepd outlives slurmd: one whose srun was SIGKILLed (as ftl ends a failed attempt)
  # keeps retrying its task-exit message, and with slurmd gone it never ends. This cluster's carry
  # its SLURM_CONF (from slurmd, from this shell).
  for p in $(pgrep -x slurmstepd); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "SLURM_CONF=$D/slurm.conf" && kill -KILL "$p" 2>/dev/null
  done
  # SIGKILL: the cluster's state goes with the scratch folder, and a slurmd told to shut down
  # took 10-20 s (a message to the stopped slurmctld waits out its timeout).
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
}
slurm_exit() {
  stop_slurm
  pkill -KILL -f "$MARKER" 2>/dev/null
  remove_scratch
}
trap slurm_exit EXIT

# slurm_netns_up: the SLURM_NODES hosts, on a /24 of 10.214.0.0/16 that no other test holds, and
# this machine on their bridge at $NET.254 (veth ftlc<pid>). This machine's address is seen by every
# test, so the /24 is chosen and claimed under a lock (on this file: nothing left behind).
slurm_netns_up() {
  local x=0 i
  for b in nsenter unshare flock; do
    command -v "$b" >/dev/null || { echo "skipped: $b is not installed"; exit 77; }
  done
  exec 9<"$SLURM_LIB"
  flock -w 60 9 || fail "waited 60 s for the lock on $SLURM_LIB (choosing the nodes' network)"
  for i in $(seq 0 253); do
    x=$((($$ + i) % 254 + 1))
    ip -4 -o addr show | grep -q " 10\.214\.$x\." || break
  done
  NET=10.214.$x # netns_lib.sh's own 10.213.77 is fine inside namespaces, not on this machine
  netns_up "$SLURM_NODES"
  trap slurm_exit EXIT # netns_up set its own
  ip link add "ftlc$$" type veth peer name ctl netns "$NS_PREFIX-sw" &&
    ip -n "$NS_PREFIX-sw" link set ctl master br0 && ip -n "$NS_PREFIX-sw" link set ctl up &&
    ip addr add "$NET.254/24" dev "ftlc$$" && ip link set "ftlc$$" up ||
    fail "cannot put this machine on the nodes' bridge"
  exec 9<&-
  # What every node resolves: each node's name, and this machine's (the login node's).
  {
    echo "127.0.0.1 localhost"
    echo "$NET.254 $(hostname -s)"
    for i in $(seq 1 "$SLURM_NODES"); do echo "$NET.$i $(slurm_node_name "$i")"; done
  } >"$D/hosts"
  for i in $(seq 1 "$SLURM_NODES"); do mkdir -p "$D/node$i/tmp"; done
}

# slurm_node_name I: node I's name, also its host name.
slurm_node_name() { echo "$NS_PREFIX-h$1"; }

# slurm_on_node I CMD...: runs CMD on node I, as that host: its network and host name, the nodes'
# /etc/hosts, its own TmpFS folder and its own /dev/shm (a tmpfs: Open MPI's shared-memory segments
# and ftl's L1 copies are per node on a real cluster; shared, one node's clean-up removed another's
# segments and its ranks failed in MPI, seen under ASan). nsenter, not `ip netns exec` (netns_lib.sh's on_host): that
# mounts a fresh /sys, without the cgroup folder slurmd insists on.
slurm_on_node() {
  local i=$1
  shift
  nsenter --net="/var/run/netns/$NS_PREFIX-h$i" unshare --uts --mount --propagation private \
    sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && mount --bind "$3" "$4" &&
           mount -t tmpfs -o mode=1777,size=4g "ftl-node-shm" /dev/shm && shift 4 && exec "$@"' \
    sh "$(slurm_node_name "$i")" "$D/hosts" "$D/node$i/tmp" "$D/tmp" "$@"
}

# slurm_node_start I: node I's slurmd (after kill_host I too: the node rebooted; ReturnToService=2
# takes it back once it registers).
slurm_node_start() { slurm_on_node "$1" slurmd -N "$(slurm_node_name "$1")" || fail "slurmd of node $1 did not start"; }

# slurm_wait_idle [S]: until every node of the cluster is idle (S seconds at most, default 30).
slurm_wait_idle() {
  local want=$((SLURM_NODES > 0 ? SLURM_NODES : 1)) deadline=$((SECONDS + ${1:-30}))
  while [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)" -lt "$want" ]; do
    [ $SECONDS -lt $deadline ] || {
      sinfo -N >&2
      tail -n 20 "$D"/log/*.log >&2
      fail "the Slurm nodes were not all idle after ${1:-30} s"
    }
    sleep 0.1
  done
}

slurm_ctl_host=localhost
slurm_nodes_conf="NodeName=ftln1 NodeAddr=127.0.0.1 Port=$d_port CPUs=8 State=UNKNOWN"
slurm_partition=ftln1
# Several nodes: SlurmdTimeout (default 300 s) is how long a silent node stays up for slurmctld.
slurm_extra_conf=""
if [ "$SLURM_NODES" -ge 1 ]; then
  slurm_netns_up
  slurm_ctl_host="$(hostname -s)($NET.254)"
  slurm_nodes_conf=$(for i in $(seq 1 "$SLURM_NODES"); do
    echo "NodeName=$(slurm_node_name "$i") NodeAddr=$NET.$i Port=$d_port CPUs=${SLURM_NODE_CPUS:-4} State=UNKNOWN"
  done)
  slurm_partition="$NS_PREFIX-h[1-$SLURM_NODES]"
  slurm_extra_conf="SlurmdTimeout=10"
fi
# TmpFS: the mpi/pmix plugin makes each step's folder there (spmix_appdir_UID_JOB.STEP): under /tmp,
# the default, two tests' clusters (slurm_srun beside slurm_sbatch_requeue) both number their first
# job 1 and shared it, and a step failed to launch ("task 0 launch failed"; flake hunt, 1 in 120).
# KillWait: the grace between a job's SIGTERM and its SIGKILL (scancel, scontrol requeue).
cat >"$D/slurm.conf" <<CONF
ClusterName=ftltest
SlurmctldHost=$slurm_ctl_host
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
$slurm_nodes_conf
PartitionName=debug Nodes=$slurm_partition Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
$slurm_extra_conf
${SLURM_CONF_EXTRA:-}
CONF
export SLURM_CONF=$D/slurm.conf
munged --key-file="$D/munge/munge.key" --socket="$D/munge/munge.sock" --pid-file="$D/munge/munged.pid" \
  --log-file="$D/log/munged.log" --seed-file="$D/munge/seed" || fail "munged did not start"
slurmctld || fail "slurmctld did not start"
if [ "$SLURM_NODES" -ge 1 ]; then
  for i in $(seq 1 "$SLURM_NODES"); do slurm_node_start "$i"; done
else
  slurmd -N ftln1 || fail "slurmd did not start"
fi
slurm_wait_idle 30
