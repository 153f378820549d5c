# tests/fault/ft_l2.sh MODE: the checkpoints' L2 level (a partner host's copy, docs/checkpoint.md
# "L2") on the example fine-tune, 3 hosts x 2 ranks and a spare (network namespaces),
# `checkpoint: {levels: [l1, l2, l3]}`. Placement: sorted hosts h1 h2 h3, host 3's shards (ranks 4
# and 5) are kept by host 1. Every mode ends with an adapter byte-identical to a failure-free run's
# and every committed checkpoint verifying.
#   spare    host 3 is killed mid-run: the spare h4 takes its place and its ranks restore host 3's
#            shards (4, 5) and h1's (0, 1) from the L2 copies on h1 and h2, and h2's (2, 3), whose
#            L2 copies were on h3, from h2's L1 copies, all over the network (their ckpt_restored
#            events say l2 with 6 shards); h3's L1 copies are never read. The transfers go over
#            direct TCP connections
#   spare_mpi           the same with FTL_CKPT_L2_TRANSPORT=mpi: the transfers go over MPI
#   spare_listen_fail   the same, rank 0 (a server on h1) failing to listen: every rank falls back
#                       to MPI
#   spare_connect_fail  the same, rank 4 (a fetcher on h4) failing to connect: every rank falls
#                       back to MPI
#   spare_stranger      the same, and while rank 0 (a server on h1) listens for the spare's fetches,
#                       another local user, on host 2, connects to it: a hello proven for another
#                       nonce, one with a guessed token, a silent connection. None gets an answer
#                       but its challenge; rank 0 names each refused peer; the fetch still goes over
#                       TCP (docs/security.md)
#   corrupt  the same loss with restarts off; the L2 copy of shard 4 gets a flipped byte, then the
#            job is run again on h1 h2 h4: every rank that reads it (fetched, or on h1 itself) names
#            the copy that failed verification and reads shard 4 from the run directory
#   deleted  the same, the L2 copy of shard 5 deleted: h1's ranks say it is gone, the others that no
#            live host holds a copy, and shard 5 comes from the run directory
# The namespaces share one file system, so the L1 folders of all "hosts" are one folder here; the
# restore still reads only what the manifest places on its own host, and other hosts' copies only
# over the network.
MODE=${1:?usage: ft_l2.sh MODE}
. "$(dirname "$0")/ft_lib.sh" || exit 1
. "$(dirname "$0")/netns_lib.sh" || exit 1
RUN=runs/l2
L1=$SCRATCH/l1
mkdir -p "$L1"

# restored ATTEMPT RANK: LEVEL/L2_SHARDS of RANK's ckpt_restored event of ATTEMPT.
restored() {
  local e
  e=$(grep '"event":"ckpt_restored"' "$RUN/events.jsonl" | grep "\"attempt\":$1[,}]" | grep "\"rank\":$2[,}]")
  echo "$(echo "$e" | grep -o '"level":"[^"]*"' | cut -d'"' -f4)/$(echo "$e" | grep -o '"l2_shards":[0-9]*' | cut -d: -f2)"
}

# expect_levels ATTEMPT R0 ... R5: each rank's LEVEL/L2_SHARDS. The fine-tune's ranks read every
# shard (replicated adapters), so each rank's levels follow from where the copies are: with host 3
# gone, shards 2 and 3 (L1 on h2, L2 on h3) come from h2's L1 copies (fetched over the network
# except on h2: l2), shards 0 and 1 from h1 (L1) and h2 (L2), shards 4 and 5 from h1 (their L2).
expect_levels() {
  local a=$1 r=0 got
  shift
  for want in "$@"; do
    got=$(restored "$a" $r)
    [ "$got" = "$want" ] || {
      grep ckpt_restored "$RUN/events.jsonl" >&2
      fail "attempt $a: rank $r restored from '$got', expected $want"
    }
    r=$((r + 1))
  done
}

case $MODE in
spare_mpi) FT_ENV="FTL_CKPT_L2_TRANSPORT: mpi" ;;
spare_listen_fail) FT_ENV="FTL_CKPT_L2_TCP_FAULT: \"listen:0\"" ;;
spare_connect_fail) FT_ENV="FTL_CKPT_L2_TCP_FAULT: \"connect:4\"" ;;
spare_stranger)
  stranger_up
  mkdir -p "$SCRATCH/l2-announce"
  FT_ENV="FTL_CKPT_L2_TCP_ANNOUNCE: \"$SCRATCH/l2-announce\""
  ;;
esac
reference 6
netns_up 4
netns_hostfile 4 >hosts
restarts=2
case $MODE in spare*) ;; *) restarts=0 ;; esac
write_job job.yaml l2 6 "hostfile: hosts" "timeouts: {node_s: 5, startup_s: 60}" "rendezvous: {timeout_s: 30}" \
  "restart: {max_restarts: $restarts, standby: off}" "checkpoint: {levels: [l1, l2, l3], l1_dir: $L1}"
start_job job.yaml
wait_first_commit "$RUN"
sleep 0.3
# The newest commit names a partner copy for every shard, host 3's on host 1.
m=$(ls "$RUN"/checkpoints/step-*/manifest.json | sort | tail -1)
grep -q '"l2_host": "'"$NS_PREFIX"'-h1"' "$m" || { cat "$m" >&2; fail "the manifest names no L2 copy on h1"; }
grep -q '"l2"' "$m" || fail "the manifest's levels do not say l2"
ftl ckpt ls "$RUN" | grep -qE "^$(basename "$(dirname "$m")" | sed 's/step-0*//') +committed .* l1\+l2\+l3 " ||
  { ftl ckpt ls "$RUN" >&2; fail "ftl ckpt ls does not say the step has l1, l2 and l3"; }
kill_host 3
if [ "$MODE" = spare_stranger ]; then
  # The spare's restore: rank 0's listener waits (hold) until the stranger's connections are in
  # its backlog; then the servers answer them while no rank's own fetches start (hold-fetch), so
  # the set-up cannot end before both hellos were judged, however slow this machine is.
  ann=$SCRATCH/l2-announce
  touch "$ann/hold" "$ann/hold-fetch"
  for _ in $(seq 1 600); do
    [ -s "$ann/rank-0.a1.port" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  [ -s "$ann/rank-0.a1.port" ] || { rm -f "$ann/hold" "$ann/hold-fetch"; cat out >&2; fail "rank 0 of attempt 1 never listened for L2"; }
  target=$(grep "^$NET.1:" "$ann/rank-0.a1.port" | head -1)
  [ -n "$target" ] || fail "rank 0 listens on no address of h1: $(cat "$ann/rank-0.a1.port")"
  (cd / && ip netns exec "$NS_PREFIX-h2" runuser -u "$STRANGER" -- /usr/bin/python3 "$STRANGER_TOOLS/forger.py" l2 "$target") \
    >l2-forgeries.jsonl 2>l2-forger.err &
  forger=$!
  for _ in $(seq 1 100); do
    grep -q '"connected"' l2-forgeries.jsonl 2>/dev/null && break
    sleep 0.1
  done
  rm -f "$ann/hold"
  grep -q '"connected": 3' l2-forgeries.jsonl || { rm -f "$ann/hold-fetch"; cat l2-forger.err >&2; fail "the stranger could not connect to $target"; }
  for _ in $(seq 1 300); do
    [ "$(grep -c "an L2 connection from $NET.2:[0-9]* was refused" "$RUN/attempt-0001/rank-00000.err" 2>/dev/null)" -ge 2 ] && break
    sleep 0.1
  done
  rm -f "$ann/hold-fetch" # the set-up ends: the silent connection is closed with it
  wait $forger || { cat l2-forger.err >&2; fail "the forger failed"; }
  cat l2-forgeries.jsonl
  [ "$(grep -c '"forgery"' l2-forgeries.jsonl)" -eq 3 ] || fail "not every L2 forgery was played"
  grep '"forgery"' l2-forgeries.jsonl | grep -v '"challenge": true' && fail "a stranger's connection got no challenge"
  grep '"forgery"' l2-forgeries.jsonl | grep -v '"ack": false' && fail "a stranger's hello was answered"
  grep '"forgery"' l2-forgeries.jsonl | grep -v '"closed": true' && fail "a stranger's connection was left open"
fi
wait_rc $pid
case $MODE in
spare*)
  expect_rc 0 out
  expect_contains out "host $NS_PREFIX-h3 is lost"
  grep '"event":"rank_started"' "$RUN/events.jsonl" | grep '"attempt":1' | grep -q "\"host\":\"$NS_PREFIX-h4\"" ||
    fail "the spare host did not take the lost host's place"
  expect_levels 1 l1+l2/4 l1+l2/4 l1+l2/4 l1+l2/4 l2/6 l2/6
  expect_contains "$RUN/attempt-0001/rank-00004.err" "from L2 (a partner's copy here, or a copy fetched from another host)"
  # The transport: direct TCP unless it was forced off or failed on one rank, then MPI on all.
  e0=$RUN/attempt-0001/rank-00000.err e4=$RUN/attempt-0001/rank-00004.err
  case $MODE in
  spare) expect_contains "$e4" "the L2 fetch goes over TCP" ;;
  spare_stranger)
    expect_contains "$e4" "the L2 fetch goes over TCP"
    [ "$(grep -c "an L2 connection from $NET.2:[0-9]* was refused" "$e0")" -eq 2 ] ||
      { cat "$e0" >&2; fail "rank 0 did not name both refused hellos from h2 ($NET.2)"; }
    grep "an L2 connection from" "$e0"
    [ "$(grep '"event":"l2_rejected"' "$RUN/events.jsonl" | grep -c "\"peer\":\"$NET.2:")" -eq 2 ] ||
      fail "expected two l2_rejected events naming $NET.2: $(grep l2_rejected "$RUN/events.jsonl")"
    ;;
  spare_mpi) expect_contains "$e4" "the L2 fetch goes over MPI: FTL_CKPT_L2_TRANSPORT=mpi" ;;
  spare_listen_fail)
    expect_contains "$e0" "the L2 fetch goes over MPI: cannot listen: fault injected"
    expect_contains "$e4" "the L2 fetch goes over MPI: rank 0 cannot or may not use TCP"
    ;;
  spare_connect_fail)
    expect_contains "$e4" "the L2 fetch goes over MPI: no connection to rank 0 for shard 4 (fault injected"
    expect_contains "$e0" "the L2 fetch goes over MPI: rank 4 could not connect"
    ;;
  esac
  [ "$MODE" = spare ] || [ "$MODE" = spare_stranger ] || ! grep -l "the L2 fetch goes over TCP" "$RUN"/attempt-0001/rank-*.err ||
    fail "a rank used TCP where every rank should have fallen back to MPI"
  # The set-up closes only its own sockets (a fallback once closed descriptor 0, which a save's
  # copy then failed to read).
  ! grep "Bad file descriptor" "$RUN"/attempt-000[01]/rank-*.err || fail "a descriptor was closed under a rank"
  ;;
corrupt|deleted)
  [ "$RC" != 0 ] || fail "the job with its restarts off finished after a lost host"
  step=$(committed_steps "$RUN" | sort -n | tail -1)
  copies=$(ls -d "$L1"/ftl-*/"$(printf 'step-%08d' "$step")"/partner)
  [ -f "$copies/shard-00004.h5" ] && [ -f "$copies/shard-00005.h5" ] || fail "no L2 copies of step $step in $copies"
  if [ "$MODE" = corrupt ]; then
    flip_middle_byte "$copies/shard-00004.h5"
  else
    rm "$copies/shard-00005.h5"
  fi
  # The spare takes host 3's place in the same hostfile.
  printf '%s slots=2\n' "$NET.1" "$NET.2" "$NET.4" >hosts
  start_job job.yaml
  wait_rc $pid
  expect_rc 0 out
  if [ "$MODE" = corrupt ]; then
    expect_contains out "shard-00004.h5.fetched-4 (of shard-00004.h5, kept on $NS_PREFIX-h1) failed verification"
    expect_contains out "partner/shard-00004.h5 (of shard-00004.h5, kept on $NS_PREFIX-h1) failed verification"
    expect_levels 1 l1+l2+l3/3 l1+l2+l3/3 l1+l2+l3/3 l1+l2+l3/3 l2+l3/5 l2+l3/5
  else
    expect_contains out "no live host holds a copy of shard-00005.h5 in memory (L1 on $NS_PREFIX-h3, L2 on $NS_PREFIX-h1)"
    expect_contains out "partner/shard-00005.h5 is gone"
    expect_levels 1 l1+l2+l3/3 l1+l2+l3/3 l1+l2+l3/3 l1+l2+l3/3 l2+l3/5 l2+l3/5
  fi
  ;;
*) fail "unknown mode $MODE" ;;
esac
same_adapter ref-6/final "$RUN/final"
verify_all "$RUN"
echo "ok"
