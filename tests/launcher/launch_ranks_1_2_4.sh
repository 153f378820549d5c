# The allreduce check through `ftl run` at 1, 2 and 4 ranks: every rank checks the closed form,
# the job exits 0, and the event log records every start-up phase.
. "$(dirname "$0")/lib.sh" || exit 1
for n in 1 2 4; do
  run_ftl out.$n run -n $n --run-dir run$n -- ftl-allreduce-check --iterations 3 --max-kib 256
  expect_rc 0 out.$n
  expect_contains out.$n "allreduce check passed on all $n ranks"
  expect_contains out.$n "all $n rank"
  [ "$(grep -c '"event":"rank_exit"' run$n/events.jsonl)" -eq "$n" ] || fail "expected $n rank_exit events"
  grep '"event":"startup"' run$n/events.jsonl > startup.$n || fail "no startup event at $n ranks"
  for phase in launch_ms rendezvous_ms mpi_init_ms comm_init_ms first_step_ms; do
    expect_contains startup.$n "\"$phase\""
  done
  [ "$(grep -c '"event":"rank_ready"' run$n/events.jsonl)" -eq "$n" ] || fail "expected $n rank_ready events"
done
# Each rank's agent is the agent's own binary beside ftl (launcher/agent_main.c: it loads 5 libraries
# where ftl loads about 50), not `ftl rank-agent`.
run_ftl parent.out run -n 2 --run-dir parent -- sh -c 'echo "parent: $(cat /proc/$PPID/comm)"'
expect_rc 0 parent.out
[ "$(grep -c 'parent: ftl-rank-agent' parent.out)" -eq 2 ] || { cat parent.out >&2; fail "the ranks' parent is not ftl-rank-agent"; }
echo "ok"
