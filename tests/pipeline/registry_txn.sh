# A channel move and its audit line are one transaction (issue 18, item 9). A rollback whose audit
# append fails (the file-size limit makes the append fail with EFBIG while the small pointer could
# still be written; audit.jsonl replaced by a folder) has not moved the channel, and the user's
# retry moves it exactly one step, with one line. A process killed between the line and the
# pointer leaves a pending move that the next command cancels exactly once ("abort"), then makes
# its own move. `ftl registry check` proves that the log's moves replay to each pointer exactly:
# a pointer edited behind the registry's back, or a move line deleted, is reported.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
use_registry
v1=$(make_package p1.tar.zst one)
v2=$(make_package p2.tar.zst two)
v3=$(make_package p3.tar.zst three)
for p in p1 p2 p3; do pipeline_tool publish "$REG" chat $p.tar.zst prod >/dev/null || fail "publish $p"; done
AUD=$REG/chat/audit.jsonl
at() { pipeline_tool resolve "$REG" chat@prod; }
moves() { grep -c "\"action\":\"$1\"" "$AUD"; }
[ "$(at)" = "$v3" ] || fail "prod is not v3"
[ "$(stat -c %s "$AUD")" -gt 1024 ] || fail "test set-up: the audit log should exceed the 1 KiB limit below"

# The audit append fails (EFBIG under a 1 KiB file-size limit; SIGXFSZ ignored so it is an error).
(
  trap '' XFSZ
  ulimit -f 1
  exec ftl rollback chat --channel prod
) >out 2>&1
RC=$?
expect_rc 1 out
[ "$(at)" = "$v3" ] || fail "the failed rollback moved prod to $(at)"
run_ftl out rollback chat --channel prod
expect_rc 0 out
[ "$(at)" = "$v2" ] || fail "the retried rollback moved prod to $(at), not one step back to v2"
[ "$(moves rollback)" = 1 ] || fail "$(moves rollback) rollback lines for one rollback"
run_ftl out registry check chat
expect_rc 0 out

# audit.jsonl replaced by a folder: refused before anything moves.
mv "$AUD" audit.saved
mkdir "$AUD"
run_ftl out promote chat "$v3" --to prod
expect_rc 1 out
[ "$(at)" = "$v2" ] || fail "prod moved although its line could not be written"
rmdir "$AUD"
mv audit.saved "$AUD"

# Killed between the line and the pointer (moves so far: three promotes by publish, one rollback;
# this is move 5): the move is pending; check accepts the registry; the
# next command cancels it once and makes exactly its own move.
FTL_CRASH_AT=promote.after_audit pipeline_tool rollback "$REG" chat prod >crash.out 2>&1
[ $? -eq 137 ] || { cat crash.out >&2; fail "expected a SIGKILL"; }
[ "$(at)" = "$v2" ] || fail "the killed rollback moved prod"
run_ftl out registry check chat
expect_rc 0 out
run_ftl out rollback chat --channel prod
expect_rc 0 out
[ "$(at)" = "$v1" ] || fail "after the pending move, rollback gave $(at), not v1"
[ "$(moves abort)" = 1 ] || fail "$(moves abort) abort lines, expected 1"
tail -2 "$AUD" | head -1 | grep -q '"action":"abort".*"seq":5' || fail "the abort line does not cancel move 5"
run_ftl out promote chat "$v3" --to prod # the next move after the settled one: no second abort
expect_rc 0 out
[ "$(moves abort)" = 1 ] || fail "the settled move was cancelled twice"
run_ftl out registry check chat
expect_rc 0 out
grep -q '"seq": 6' "$REG/chat/channels/prod.json" || fail "prod.json does not carry move 6: $(cat "$REG/chat/channels/prod.json")"

# check proves the chain: a pointer edited behind the registry's back, a deleted move line.
cp "$REG/chat/channels/prod.json" prod.saved
python3 - "$REG/chat/channels/prod.json" "$v2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["current"] = sys.argv[2]
open(sys.argv[1], "w").write(json.dumps(p, indent=2, sort_keys=True) + "\n")
PY
run_ftl out registry check chat
expect_rc 1 out
expect_contains out "is not what $AUD records for prod"
run_ftl out promote chat "$v1" --to prod
expect_rc 1 out
expect_contains out "refusing to move chat@prod"
cp prod.saved "$REG/chat/channels/prod.json"
cp "$AUD" audit.saved
grep -v '"action":"rollback"' audit.saved | head -c 100000 >"$AUD"
run_ftl out registry check chat
expect_rc 1 out
cp audit.saved "$AUD"
run_ftl out registry check chat
expect_rc 0 out
echo ok
