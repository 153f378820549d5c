# tests/launcher/rank_output_at_exit.sh: a rank's last output line, written just before it exits,
# reaches its log file and the console even when its agent was not scheduled from the write until
# after the exit (a busy machine): the agent drains the pipes before it gives up on them.
#
# How the moment is made, without a race: each rank's agent is stopped (SIGSTOP) while its program
# is quiet, so the agent is held inside its poll; the program then writes its last line and exits,
# and only once the program is a zombie is the agent continued. The SIGCHLD waiting for it makes
# its poll return EINTR, and the agent reaps the program right after: an agent that took "reaped
# and the poll saw nothing" as "drained" (hf_lora_kill's unbroken run lost `done: 40 steps` so)
# dropped the line still in the pipe. Rounds: 3, each a fresh run of 2 ranks.
. "$(dirname "$0")/lib.sh" || exit 1

# The program: says it is ready, waits (quiet) for the test's go file, then writes its last line on
# stdout and on stderr and exits at once.
cat >prog.sh <<'EOF'
echo "ready rank $RANK"
while [ ! -e "$GO" ]; do sleep 0.02; done
echo "last line of rank $RANK"
echo "last error line of rank $RANK" >&2
exit 0
EOF

# state PID: the process's scheduler state (R, S, T, Z...), empty once it is gone.
state() { sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null; }

for round in 1 2 3; do
  dir=r$round
  go=$SCRATCH/go-$round
  GO=$go ftl run -n 2 --no-standby --run-dir "$dir" -- /bin/sh "$SCRATCH/prog.sh" "$MARKER" >"$dir.out" 2>&1 &
  pid=$!
  for r in 0 1; do
    for _ in $(seq 1 600); do
      grep -q "^ready rank $r" "$dir/attempt-0000/rank-0000$r.out" 2>/dev/null && break
      sleep 0.05
    done
    grep -q "^ready rank $r" "$dir/attempt-0000/rank-0000$r.out" 2>/dev/null || { cat "$dir.out" >&2; fail "rank $r did not start"; }
  done
  progs=() agents=()
  for r in 0 1; do
    p=$(gang_pids "$dir" prog.sh "$r" 0 sh | head -1)
    [ -n "$p" ] || fail "round $round: the program of rank $r was not found"
    a=$(awk '{print $4}' "/proc/$p/stat")
    [ "$(cat "/proc/$a/comm")" = ftl-rank-agent ] || fail "round $round: rank $r's program's parent $a is not its agent"
    progs+=("$p") agents+=("$a")
  done
  # Held in their poll while the programs write and exit.
  kill -STOP "${agents[@]}"
  touch "$go"
  for p in "${progs[@]}"; do
    for _ in $(seq 1 200); do
      [ "$(state "$p")" = Z ] && break
      sleep 0.01
    done
    [ "$(state "$p")" = Z ] || { kill -CONT "${agents[@]}"; fail "round $round: program $p did not exit (state $(state "$p"))"; }
  done
  kill -CONT "${agents[@]}"
  wait_rc $pid
  expect_rc 0 "$dir.out"
  for r in 0 1; do
    expect_contains "$dir/attempt-0000/rank-0000$r.out" "last line of rank $r"
    expect_contains "$dir/attempt-0000/rank-0000$r.err" "last error line of rank $r"
  done
  expect_contains "$dir.out" "[rank 0] last line of rank 0"
  expect_contains "$dir.out" "[rank 1] last line of rank 1"
done
expect_no_leftovers
echo ok
