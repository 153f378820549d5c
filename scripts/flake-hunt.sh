#!/usr/bin/env bash
# Runs tests of the normal build many times over, in random order, to find the ones whose verdict
# depends on timing, and prints each test's failures:
#
#   scripts/flake-hunt.sh [-n N] [--load K] [-j J] [-L LABELS] [--build DIR | --fresh] [REGEX]
#
#   -n N       rounds (default 5): each round runs every selected test once, in a random order
#   --load K   K busy loops beside the tests (default 0, a quiet machine); --load 2 on the 2-core CI
#              machine makes it about twice as slow
#   -j J       tests at once (default FTL_TEST_JOBS, as scripts/test.sh runs them: scripts/ctest-lib.sh)
#   --build D  the build folder (default build/release; built with scripts/build.sh when absent)
#   --fresh    clone this checkout's HEAD into a scratch folder and set up, build and test there, as
#              CI does (its logs are kept under /tmp/ftl-flake-hunt.*)
#   -L LABELS  only the tests with one of these labels (ctest -L: a regex, e.g. 'fault|launcher|pipeline')
#   REGEX      the tests (ctest -R); default every test
#
# Each round's output is kept in DIR/flake-hunt/round-N.log; a failing test's output is shown at the
# end. Exit code 0 only when no run of any test failed. A test that fails here is fixed at its
# cause (docs/testing.md, "Timing"), never by a wider deadline alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ctest-lib.sh
rounds=5
load=0
jobs=$FTL_TEST_JOBS
build=build/release
regex=""
labels=""
fresh=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n) rounds=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -L) labels=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "flake-hunt: unknown option '$1' (see scripts/flake-hunt.sh --help)" >&2; exit 2 ;;
    *) regex=$1; shift ;;
  esac
done
for v in "$rounds" "$load" "$jobs"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "flake-hunt: '$v' is not a whole number" >&2; exit 2; }
done
[ "$rounds" -ge 1 ] && [ "$jobs" -ge 1 ] || { echo "flake-hunt: -n and -j must be at least 1" >&2; exit 2; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$fresh" = 1 ]; then
  scratch=$(mktemp -d /tmp/ftl-flake-hunt.XXXXXX)
  git clone -q "$PWD" "$scratch/ftl"
  echo "flake-hunt: a fresh clone of $(git -C "$scratch/ftl" rev-parse --short HEAD) in $scratch/ftl"
  cd "$scratch/ftl"
  bash scripts/setup-deps.sh
  bash scripts/setup-python.sh
  build=build/release
fi
if [ ! -f "$build/CTestTestfile.cmake" ]; then
  mkdir -p "$(dirname "$build")"
  bash scripts/build.sh "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build.build.log" 2>&1 ||
    { cat "$build.build.log" >&2; exit 1; }
fi
build=$(cd "$build" && pwd)
select=()
[ -n "$regex" ] && select=(-R "$regex")
[ -n "$labels" ] && select+=(-L "$labels")
n_tests=$(cd "$build" && ctest -N "${select[@]}" | sed -n 's/^Total Tests: //p')
[ "${n_tests:-0}" -gt 0 ] || { echo "flake-hunt: no test matches '${regex}'${labels:+ with a label of '$labels'}" >&2; exit 2; }

out=$build/flake-hunt
rm -rf "$out"
mkdir -p "$out"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for _ in $(seq 1 "$load"); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "flake-hunt: $n_tests test(s) matching '${regex:-.}'${labels:+ labelled '$labels'}, $rounds round(s), -j $jobs, $load busy loop(s) on $(nproc) core(s)"

# The packets the kernel dropped from its per-CPU backlogs (/proc/net/softnet_stat, column 2): the
# network-namespace tests' "hosts" talk through them, and a dropped packet silences a TCP connection
# until its resend (0.2 s, doubling), so a round that saw drops says so.
softnet_drops() {
  local s=0 _ d
  while read -r _ d _; do s=$((s + 16#$d)); done </proc/net/softnet_stat 2>/dev/null
  echo "$s"
}

t_all=$(date +%s)
for r in $(seq 1 "$rounds"); do
  t0=$(date +%s)
  drops0=$(softnet_drops)
  set +e
  (cd "$build" && ctest -j "$jobs" --schedule-random --output-on-failure "${select[@]}") >"$out/round-$r.log" 2>&1
  set -e
  ctest_results "$out/round-$r.log" | sed "s/^/$r\t/" >>"$out/results.tsv"
  bad=$(ctest_results "$out/round-$r.log" | awk -F'\t' '$2 != "passed" && $2 != "skipped" { printf "%s%s (%s)", sep, $1, $2; sep = ", " }')
  drops=$(( $(softnet_drops) - drops0 ))
  echo "round $r: $(( $(date +%s) - t0 )) s, load $(cut -d' ' -f1 /proc/loadavg)${bad:+; not passed: $bad}$( [ "$drops" -gt 0 ] && echo "; $drops packet(s) dropped by the kernel's backlog")"
done

echo
echo "flake-hunt: $rounds round(s) in $(( $(date +%s) - t_all )) s; tests that did not pass every run:"
awk -F'\t' '{ runs[$2]++; if ($3 != "passed" && $3 != "skipped") { bad[$2]++; how[$2] = how[$2] " " $3 "@" $1 } }
  END {
    for (t in bad) { printf "  %-40s %d of %d runs:%s\n", t, bad[t], runs[t], how[t]; n++ }
    if (!n) print "  none"
  }' "$out/results.tsv" | sort
total=$(wc -l <"$out/results.tsv")
failed=$(awk -F'\t' '$3 != "passed" && $3 != "skipped"' "$out/results.tsv" | wc -l)
skipped=$(awk -F'\t' '$3 == "skipped"' "$out/results.tsv" | wc -l)
echo "flake-hunt: $total test runs, $failed not passed, $skipped skipped; logs in $out"
if [ "$failed" -gt 0 ]; then
  echo
  echo "The failing runs' output (also in $out/round-N.log):"
  awk -F'\t' '$3 != "passed" && $3 != "skipped" { print $1, $2 }' "$out/results.tsv" | while read -r r t; do
    echo "--- round $r: $t"
    awk -v t="$t" '$0 ~ "Test +#[0-9]+: " t " " {on = 1; next} on && /^ *[0-9]+\/[0-9]+ Test +#|^ +Start +[0-9]+: / {exit} on' \
      "$out/round-$r.log" | tail -n 40
  done
  exit 1
fi
