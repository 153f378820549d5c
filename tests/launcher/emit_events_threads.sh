# Events from several threads of every rank reach the event log whole: 2 ranks x 4 threads x 50.
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out run -n 2 --run-dir run -- emit_threads
expect_rc 0 out
n=$(grep -c '"event":"test_threaded"' run/events.jsonl)
[ "$n" -eq 400 ] || fail "expected 400 threaded events, found $n"
# Every line is one JSON object (no interleaving).
python3 -c "
import json, sys
for line in open('run/events.jsonl'):
    json.loads(line)
" || fail "the event log has a malformed line"
echo "ok"
