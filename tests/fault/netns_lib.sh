# tests/fault/netns_lib.sh: several "hosts" on this machine, each a network namespace with its own
# address and host name, joined by a bridge in a namespace of its own (machine-notes.md). The
# addresses exist only inside these namespaces; nothing leaves them. mpirun reaches the hosts
# through rsh_agent.sh. netns_up N creates hosts 1..N; teardown kills what runs in them and
# deletes them. Needs root and iproute2 (skipped, 77, otherwise).
. "$(dirname "$0")/lib.sh" || exit 1
command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || { echo "skipped: no network namespaces here"; exit 77; }
NS_PREFIX="ftl$$"
NET=10.213.77
NS_COUNT=0

netns_down() {
  for i in $(seq 1 "$NS_COUNT"); do
    ip netns pids "$NS_PREFIX-h$i" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$NS_PREFIX-h$i" 2>/dev/null
  done
  ip netns del "$NS_PREFIX-sw" 2>/dev/null
  # The hosts' Open MPI daemons keep their session folders in this machine's /tmp; a killed host's
  # stay behind (a real host's go with its reboot), so the test removes what its hosts left.
  rm -rf /tmp/ompi."$NS_PREFIX"-h* 2>/dev/null
  # The hosts' packets pass through this machine's per-CPU backlog (net.core.netdev_max_backlog),
  # where a busy CPU can drop them, and TCP then resends only after its timeout (0.2 s, doubling):
  # said, since a host that went silent for seconds in such a test may have been only that.
  local drops
  drops=$(softnet_drops)
  [ -n "${NS_DROPS0:-}" ] && [ "$drops" -gt "$NS_DROPS0" ] &&
    echo "note: the kernel dropped $((drops - NS_DROPS0)) packet(s) from its backlog (softnet_stat) while this test ran, on any of this machine's namespaces" >&2
  return 0
}

# The packets the kernel dropped from its per-CPU backlogs since boot (/proc/net/softnet_stat).
softnet_drops() {
  local s=0 _ d
  while read -r _ d _; do s=$((s + 16#$d)); done </proc/net/softnet_stat 2>/dev/null
  echo "$s"
}

netns_up() {
  NS_COUNT=$1
  NS_DROPS0=$(softnet_drops)
  trap 'netns_down; pkill -KILL -f "$MARKER" 2>/dev/null; remove_scratch' EXIT
  ip netns add "$NS_PREFIX-sw" || fail "cannot create network namespaces"
  ip -n "$NS_PREFIX-sw" link add br0 type bridge
  ip -n "$NS_PREFIX-sw" link set br0 up
  for i in $(seq 1 "$NS_COUNT"); do
    local ns="$NS_PREFIX-h$i"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$NS_PREFIX-sw"
    ip -n "$NS_PREFIX-sw" link set "p$i" master br0
    ip -n "$NS_PREFIX-sw" link set "p$i" up
    ip -n "$ns" addr add "$NET.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  cat >"$SCRATCH/rsh_agent.sh" <<AGENT
#!/bin/sh
# mpirun's plm_rsh_agent: "log in" to a namespace host by its address.
host=\$1
shift
case "\$host" in
  $NET.*) ns=$NS_PREFIX-h\${host##*.} ;;
  *) echo "rsh_agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns; exec sh -c \\"\\\$0\\"" "\$*"
AGENT
  chmod +x "$SCRATCH/rsh_agent.sh"
  export OMPI_MCA_plm_rsh_agent="$SCRATCH/rsh_agent.sh" OMPI_MCA_plm_rsh_no_tree_spawn=1
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=$NET.0/24 OMPI_MCA_oob_tcp_if_include=$NET.0/24
}

# netns_hostfile N: a hostfile line with 2 slots for each of hosts 1..N.
netns_hostfile() { for i in $(seq 1 "$1"); do printf '%s slots=2\n' "$NET.$i"; done; }

# start_job SPEC: `ftl run SPEC` in the background on host 1, the rendezvous on its address, its
# output in `out` and its pid in $pid (150 s at most). The one way these tests start a job.
start_job() {
  on_host 1 timeout -k 5 150 ftl run --rdzv-host $NET.1 --kill-grace-ms 1000 "$1" >out 2>&1 &
  pid=$!
}

# run_job OUTFILE SPEC: `ftl run SPEC` in the foreground on host 1, the rendezvous on its address,
# its output in OUTFILE and its exit code in $RC (120 s at most).
run_job() {
  on_host 1 timeout -k 5 120 ftl run --rdzv-host $NET.1 --kill-grace-ms 1000 "$2" >"$1" 2>&1
  RC=$?
}

# on_host I CMD...: runs CMD on host I, with that host's name.
on_host() {
  local i=$1
  shift
  ip netns exec "$NS_PREFIX-h$i" unshare --uts sh -c "hostname $NS_PREFIX-h$i; exec \"\$0\" \"\$@\"" "$@"
}

# kill_host I: every process of host I dies at once (a node crash). At once matters: kill -9 of a
# list of processes is one signal after another, and a process that outlives its parent by a
# moment runs again (a rank agent whose daemon died tells the launcher so: its parent-death signal
# is SIGTERM), which no crashed machine does. So every process is stopped first (a stop takes
# effect when the process is next scheduled: we wait until each shows state T, 2 s at most), then
# killed children first: a stopped process whose parent dies is continued by the kernel when that
# orphans its process group, so no process may outlive its parent even stopped.
kill_host() {
  local pids pid state order
  pids=$(ip netns pids "$NS_PREFIX-h$1")
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -STOP $pids 2>/dev/null
  for _ in $(seq 1 200); do
    state=stopped
    for pid in $pids; do
      case "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)" in T | t | Z | X | "") ;; *) state=running ;; esac
    done
    [ "$state" = stopped ] && break
    sleep 0.01
  done
  # Deepest first: each process's depth is the number of its ancestors on this host.
  # shellcheck disable=SC2086
  order=$(ps -o pid=,ppid= -p "$(echo $pids | tr ' ' ,)" | awk '
    { parent[$1] = $2; n[NR] = $1 }
    END { for (i = 1; i <= NR; i++) { d = 0; p = parent[n[i]]; while (p in parent) { d++; p = parent[p] } print d, n[i] } }' |
    sort -rn | awk '{ print $2 }')
  # shellcheck disable=SC2086
  kill -KILL $order 2>/dev/null
  # shellcheck disable=SC2086
  kill -KILL $pids $(ip netns pids "$NS_PREFIX-h$1") 2>/dev/null
  return 0
}

# link_down I: host I's network link goes down (its processes live on, cut off).
link_down() { ip -n "$NS_PREFIX-h$1" link set eth0 down; }
