# A rank that exits 3: ftl names the rank, its host and the code, ends the others, exits 1.
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out run -n 4 --max-restarts 0 --run-dir run -- gang_probe --exit-rank 3 --code 3 --marker "$MARKER"
expect_rc 1 out
expect_contains out "rank 3 on host $(hostname -s) exited with code 3 (the first failure"
expect_contains run/events.jsonl '"event":"failure"'
grep '"event":"failure"' run/events.jsonl | grep -q '"rank":3' || fail "failure event does not name rank 3"
expect_no_leftovers
echo "ok"
