# tests/bench/not_run.sh CODE MESSAGE...: stands in for a smoke test that cannot run here: prints
# MESSAGE and exits CODE (77: skipped, its benchmark is not in this build; 1: a benchmark has no
# smoke test, tests/bench/CMakeLists.txt).
code=$1
shift
if [ "$code" -eq 77 ]; then echo "SKIP: $*"; else echo "FAIL: $*" >&2; fi
exit "$code"
