# tests/fault/lib.sh: the launcher tests' helpers, plus what fault tests need.
. "$(dirname "$0")/../launcher/lib.sh" || exit 1

# ledger_count FILE: failure records in a run's ledger.
ledger_count() {
  local n=0
  [ -f "$1" ] && n=$(grep -c '"record":"failure"' "$1")
  echo "${n:-0}"
}

# print_latency LABEL MS: one line of the detection latencies the fault tests report.
print_latency() {
  printf 'detection latency, %s: %s ms\n' "$1" "$2"
}

# failure_lag_ms RUNDIR T0_NS: ms from T0_NS (date +%s%N, when the fault was caused) to the first
# failure event in the run's event log, as the launcher stamped it.
failure_lag_ms() {
  local failure_us
  failure_us=$(grep '"event":"failure"' "$1/events.jsonl" | head -1 | sed 's/.*"t_us":\([0-9]*\).*/\1/')
  echo $(((failure_us - $2 / 1000) / 1000))
}

# probe_job FILE NAME RANKS 'PROBE ARGS' [extra YAML lines...]: a job spec running fault_probe with
# those arguments (split at spaces) and this test's --marker, so expect_no_leftovers finds its ranks.
probe_job() {
  local file=$1 name=$2 ranks=$3
  local -a args
  read -r -a args <<<"$4"
  shift 4
  {
    echo "name: $name"
    echo "ranks: $ranks"
    echo "program: fault_probe"
    echo "args: $(yaml_list "${args[@]}" --marker "$MARKER")"
    printf '%s\n' "$@"
  } >"$file"
}

# expect_host_left_out RUNDIR HOST: the run's second attempt left HOST out of its hostfile, and the
# failure ledger and the event log name it as the host that could not be reached.
expect_host_left_out() {
  local run=$1 host=$2
  expect_contains "$run/attempt-0001/hostfile" "# left out: $host slots=2"
  grep '"record":"failure"' "$run/failures.jsonl" | grep -q "\"bad_host\":\"$host\"" ||
    fail "the ledger does not name $host as the bad host"
  grep -q "\"event\":\"host_unreachable\".*\"host\":\"$host\"" "$run/events.jsonl" || fail "no host_unreachable event"
}
