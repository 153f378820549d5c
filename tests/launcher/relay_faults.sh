# The host relay (wire version 3, on by default): every agent and rank of this host reports through
# one relay process, and failures are still named as without it: a killed rank is that rank's
# failure (and the relay is gone with the gang: nothing is left over); a killed agent is that
# rank's lost agent; the relay itself killed loses every agent behind it, an attempt failure that
# says so (on the launcher's own host never a lost host). FTL_RELAY=0 keeps the old shape.
. "$(dirname "$0")/lib.sh" || exit 1
export FTL_RELAY=1 FTL_LOG_LEVEL=debug

# the process ids of this job's agents (not the relay, a session leader) and of its relay
relay_pid() { ps -eo pid,sid,args | awk -v m="$MARKER" '$1 == $2 && /rank-agent/ && index($0, m) { print $1 }'; }
agent_of_rank() {
  local p
  for p in $(ps -eo pid,sid,args | awk -v m="$MARKER" '$1 != $2 && /rank-agent/ && index($0, m) { print $1 }'); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
}

# 1. A rank killed: named as ever; the relay carried the gang and ended with it.
run_ftl out run -n 4 --max-restarts 0 --run-dir run1 -- gang_probe --kill-rank 2 --check-env --marker "$MARKER"
expect_rc 1 out
expect_contains out "relay of host"
expect_contains out "rank 2 on host $(hostname -s) was killed by signal 9 (SIGKILL)"
grep -q 'leftover' out && fail "the relay was left over: $(grep leftover out)"
expect_no_leftovers

# 2. An agent killed: that rank's agent is lost (its relay says its connection closed).
ftl run -n 4 --max-restarts 0 --run-dir run2 -- gang_probe --sleep-ms 30000 --marker "$MARKER" >out2 2>&1 &
pid=$!
wait_for_event run2 rendezvous_complete out2
[ -n "$(relay_pid)" ] || fail "no relay process runs"
kill -KILL "$(agent_of_rank 1)"
wait_rc $pid
expect_rc 1 out2
expect_contains out2 "rank 1 on host $(hostname -s) lost its agent"
grep '"event":"failure"' run2/events.jsonl | grep -q '"cause":"agent_lost"' || fail "the failure is not agent_lost"
expect_no_leftovers

# 3. The relay killed: every agent behind it is lost at once; the attempt fails and says why.
ftl run -n 4 --max-restarts 0 --run-dir run3 -- gang_probe --sleep-ms 30000 --marker "$MARKER" >out3 2>&1 &
pid=$!
wait_for_event run3 rendezvous_complete out3
kill -KILL "$(relay_pid)"
wait_rc $pid
expect_rc 1 out3
expect_contains out3 "a host's relay closed its connection: 8 agents and ranks behind it lost with it"
expect_contains out3 "lost its agent"
grep -q "host $(hostname -s) is lost" out3 && fail "the launcher's own host was called lost"
expect_no_leftovers

# 4. FTL_RELAY=0: no relay; every agent and rank connects directly, and a failure reads the same.
FTL_RELAY=0 run_ftl out4 run -n 2 --max-restarts 0 --run-dir run4 -- gang_probe --kill-rank 1 --check-env --marker "$MARKER"
expect_rc 1 out4
expect_contains out4 "rank 1 on host $(hostname -s) was killed by signal 9 (SIGKILL)"
grep -q "relay of host" out4 && fail "FTL_RELAY=0 still started a relay"
expect_no_leftovers

# 5. The launcher stopped (SIGSTOP), its host up: the relay hears nothing for timeouts.node_s, tells
# its agents why and closes, and each agent ends its program while the launcher is still stopped
# (the relay's fence: in a large gang the launcher pings seldom, docs/formats/rendezvous-wire.md).
cat >fence.yaml <<EOF
name: fence
ranks: 2
program: gang_probe
args: ["--sleep-ms", "60000", "--marker", "$MARKER"]
timeouts: {node_s: 3}
restart: {max_restarts: 0}
EOF
ftl run --run-dir run5 fence.yaml >out5 2>&1 &
pid=$!
wait_for_event run5 rendezvous_complete out5
programs_left() { pgrep -f "gang_probe --sleep-ms 60000 --marker $MARKER" >/dev/null; }
programs_left || fail "the programs did not start"
kill -STOP "$pid"
gone() { ! programs_left; }
wait_until 30 "the relay's fence did not end the programs of a stopped launcher" gone
kill -CONT "$pid"
wait_rc $pid
expect_rc 1 out5
expect_contains out5 "the host's relay gave up on the launcher: no word from the launcher for "
expect_no_leftovers
echo "ok"
