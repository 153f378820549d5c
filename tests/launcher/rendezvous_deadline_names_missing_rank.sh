# A rank that never calls ftl_init: the rendezvous deadline fails the gang, the error names that
# rank and its host, the joined ranks get the error from ftl_init, and nothing of the job is left.
. "$(dirname "$0")/lib.sh" || exit 1
start=$(date +%s%N)
run_ftl out run -n 4 --max-restarts 0 --rendezvous-timeout 5 --kill-grace-ms 1000 --run-dir run -- gang_probe --no-init-rank 2 --marker "$MARKER"
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect_rc 4 out
expect_contains out "rendezvous deadline of 5.0 s passed with 1 of 4 ranks missing: rank 2 (host $(hostname -s))"
expect_contains run/events.jsonl '"event":"rendezvous_failed"'
# Every rank that did arrive was told why, by ftl_init's error, and said so before the gang was
# ended (the launcher waits for their exits, not merely for their connections to close).
for r in 0 1 3; do
  grep -q "rank 2 (host" "run/attempt-0000/rank-0000$r.err" || { cat out >&2; fail "joined rank $r did not say why"; }
done
[ "$elapsed_ms" -lt 20000 ] || fail "took ${elapsed_ms} ms to fail a 5 s rendezvous"
expect_no_leftovers
echo "ok (failed after ${elapsed_ms} ms)"
