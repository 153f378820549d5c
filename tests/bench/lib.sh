# tests/bench/lib.sh: shared by the benchmarks' smoke tests. Each smoke test runs one benchmark of
# bench/ at its smallest size and checks that it completes and prints its tables: the header lines,
# and that every ratio row carries numbers. It never judges the numbers themselves (the suite runs
# on a loaded 2-core machine), so no smoke test is labelled timing.
. "$(dirname "$0")/../launcher/lib.sh" || exit 1
export FTL_LOG_LEVEL=warn
NUM='[0-9]+\.[0-9]+'

# run_bench LIMIT_S CMD...: runs the benchmark, its stdout in bench.out and its stderr in bench.err;
# fails, showing both, when it exits non-zero or runs past LIMIT_S seconds.
run_bench() {
  local limit=$1
  shift
  timeout -k 10 "$limit" "$@" >bench.out 2>bench.err
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "--- stdout:" >&2
    cat bench.out >&2
    echo "--- stderr:" >&2
    tail -n 200 bench.err >&2
    [ "$rc" -eq 124 ] && fail "$* ran past ${limit} s"
    fail "$* exited with $rc"
  fi
  cat bench.out
}

# expect_line ERE: some line of the table (bench.out) matches the extended regular expression.
expect_line() {
  grep -qE -- "$1" bench.out || { echo "--- bench.out:" >&2; cat bench.out >&2; fail "no line matching '$1' in the table"; }
}

# expect_lines N ERE: exactly N lines of bench.out match.
expect_lines() {
  local n
  n=$(grep -cE -- "$2" bench.out)
  [ "$n" -eq "$1" ] || { echo "--- bench.out:" >&2; cat bench.out >&2; fail "expected $1 lines matching '$2', got $n"; }
}
