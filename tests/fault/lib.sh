# tests/fault/lib.sh: the launcher tests' helpers, plus what fault tests need.
. "$(dirname "$0")/../launcher/lib.sh" || exit 1

# ledger_count FILE: failure records in a run's ledger.
ledger_count() {
  local n=0
  [ -f "$1" ] && n=$(grep -c '"record":"failure"' "$1")
  echo "${n:-0}"
}

# latency_of EVENTS: the failure's detection latency as the launcher measured it.
print_latency() { # label, ms
  printf 'detection latency, %s: %s ms\n' "$1" "$2"
}
