# A registry others can write into (issue 18, items 6 and 10 and the smaller ones): a FIFO where a
# regular file belongs (a channel pointer, a served adapter file, the audit log, the lock) is
# refused at once, never waited on while the lock is held (each command bounded by `timeout`, so a
# hang fails the test); a PATH.tmp planted as a link next to a pointer is neither written through
# nor installed; an audit log that is a link is refused and its target untouched. `rollback` of an
# unknown adapter creates nothing; stale adapter.tmp-* folders of a crashed unpack are removed
# under the lock; one torn pointer does not take `routes` down for the other adapters.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
use_registry
T="timeout -k 5 30"
# bounded OUT ARGS...: ftl ARGS under a deadline; a hang is a failure, not a stuck test.
bounded() {
  local out=$1
  shift
  $T ftl "$@" >"$out" 2>&1
  RC=$?
  [ $RC -eq 124 ] || [ $RC -eq 137 ] && { cat "$out" >&2; fail "ftl $* hung"; }
  return 0
}
v1=$(make_package p1.tar.zst one)
v2=$(make_package p2.tar.zst two)
pipeline_tool publish "$REG" chat p1.tar.zst prod >/dev/null || fail "publish v1"
pipeline_tool publish "$REG" chat p2.tar.zst canary >/dev/null || fail "publish v2"
pipeline_tool publish "$REG" other p1.tar.zst prod >/dev/null || fail "publish other"

# A FIFO as the channel pointer: promote is refused at once (and does not keep the lock).
mv "$REG/chat/channels/prod.json" prod.json.saved
mkfifo "$REG/chat/channels/prod.json"
bounded out promote chat "$v2" --to prod --lock-timeout-ms 2000
expect_rc 1 out
expect_contains out "is not a regular file"
bounded out promote chat "$v1" --to canary --lock-timeout-ms 2000 # another writer gets the lock
expect_rc 0 out
bounded out registry routes
expect_rc 1 out
expect_contains out "chat@prod"
expect_contains out "other@prod=$REG/other/versions/$v1/adapter"
bounded out registry check chat
expect_rc 1 out
rm "$REG/chat/channels/prod.json"
mv prod.json.saved "$REG/chat/channels/prod.json"

# One torn pointer: routes reports it, lists the rest, exits non-zero.
cp "$REG/chat/channels/prod.json" prod.json.saved
head -c 100 prod.json.saved >"$REG/chat/channels/prod.json"
bounded out registry routes
expect_rc 1 out
expect_contains out "ftl registry routes: chat@prod: "
expect_contains out "chat@canary=$REG/chat/versions/$v1/adapter"
expect_contains out "other@prod=$REG/other/versions/$v1/adapter"
cp prod.json.saved "$REG/chat/channels/prod.json"
bounded out registry routes
expect_rc 0 out

# A FIFO in a served folder, named as a declared file and as an undeclared one.
A=$REG/chat/versions/$v1/adapter
mv "$A/adapter_config.json" cfg.saved
mkfifo "$A/adapter_config.json"
bounded out registry routes
expect_rc 1 out
expect_contains out "is not a regular file"
rm "$A/adapter_config.json"
mv cfg.saved "$A/adapter_config.json"
mkfifo "$A/tokenizer_config.json"
bounded out registry routes
expect_rc 1 out
expect_contains out "tokenizer_config.json is not declared in its manifest"
rm "$A/tokenizer_config.json"

# The audit log and the lock as FIFOs.
mv "$REG/chat/audit.jsonl" audit.saved
mkfifo "$REG/chat/audit.jsonl"
bounded out promote chat "$v2" --to prod --lock-timeout-ms 2000
expect_rc 1 out
rm "$REG/chat/audit.jsonl"
mv audit.saved "$REG/chat/audit.jsonl"
[ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v1" ] || fail "prod moved although its move could not be recorded"
mv "$REG/chat/.lock" lock.saved
mkfifo "$REG/chat/.lock"
bounded out promote chat "$v2" --to prod --lock-timeout-ms 2000
expect_rc 1 out
expect_contains out "not a regular file"
rm "$REG/chat/.lock"

# A planted PATH.tmp link next to the pointer: the target keeps its bytes, the pointer is a file.
echo precious >victim.txt
for n in prod.json.tmp prod.json.tmp.1 prod.json.tmp-000000000000; do ln -s "$SCRATCH/victim.txt" "$REG/chat/channels/$n"; done
bounded out promote chat "$v2" --to prod
expect_rc 0 out
[ "$(cat victim.txt)" = precious ] || fail "the promote wrote through a planted link"
[ -L "$REG/chat/channels/prod.json" ] && fail "the planted link became the pointer"
[ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v2" ] || fail "prod is not v2"
# The audit log as a link: refused, its target untouched.
echo precious2 >victim2.txt
mv "$REG/chat/audit.jsonl" audit.saved
ln -s "$SCRATCH/victim2.txt" "$REG/chat/audit.jsonl"
bounded out rollback chat --channel prod
expect_rc 1 out
[ "$(cat victim2.txt)" = precious2 ] || fail "the audit line went through a link"
[ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v2" ] || fail "prod moved without its audit line"
rm "$REG/chat/audit.jsonl"
mv audit.saved "$REG/chat/audit.jsonl"
bounded out registry check chat
expect_rc 0 out

# rollback (and promote) of an unknown adapter: refused, nothing created.
bounded out rollback ghost --channel prod
expect_rc 1 out
expect_contains out "no adapter ghost"
[ -e "$REG/ghost" ] && fail "rollback created the unknown adapter's folders"
bounded out promote ghost "$v1" --to prod
expect_rc 1 out
[ -e "$REG/ghost" ] && fail "promote created the unknown adapter's folders"
bounded out rollback --registry "$SCRATCH/no-registry" chat --channel prod
expect_rc 1 out
[ -e "$SCRATCH/no-registry" ] && fail "rollback created a registry"

# A crash inside unpack leaves adapter.tmp-*: removed by the next command under the lock.
rm -rf "${REG:?}/chat/versions/$v2/adapter"
FTL_CRASH_AT=package.unpack.rename $T ftl registry routes >crash.out 2>&1
[ $? -eq 137 ] || { cat crash.out >&2; fail "expected the unpack to be killed"; }
ls -d "$REG/chat/versions/$v2"/adapter.tmp-* >/dev/null 2>&1 || fail "the crash left no adapter.tmp-* (test set-up)"
mkdir -p "$REG/chat/versions/.tmp-dead-000000/adapter.tmp-dead/sub" && touch "$REG/chat/versions/.tmp-dead-000000/adapter.tmp-dead/sub/f"
bounded out promote chat "$v1" --to prod
expect_rc 0 out
ls -d "$REG/chat/versions/$v2"/adapter.tmp-* >/dev/null 2>&1 && fail "a stale adapter.tmp-* was left"
[ -e "$REG/chat/versions/.tmp-dead-000000" ] && fail "a stale versions/.tmp-* (with folders inside) was left"
# A publish killed while unpacking its stored copy leaves nothing behind after the next command.
v3=$(make_package p3.tar.zst three)
FTL_CRASH_AT=package.unpack.rename $T pipeline_tool publish "$REG" chat p3.tar.zst >crash.out 2>&1
[ $? -eq 137 ] || { cat crash.out >&2; fail "expected the publish to be killed"; }
pipeline_tool publish "$REG" chat p3.tar.zst >/dev/null || fail "the retry failed"
ls -a "$REG/chat/versions" | grep -q '^\.tmp-' && fail "a temporary version folder was left"
bounded out registry routes
expect_rc 0 out
bounded out registry check chat
expect_rc 0 out
echo ok
