# The registry (pipeline/registry.h): publish (and its no-op repeat), a different content under an
# existing id refused, promote, rollback back to the previous pointer (twice), fetch by channel and
# by version, routes (lazy, verified unpacking), ls, check; then the same through `ftl` when the
# binary has the pipeline's commands.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
REG=$SCRATCH/registry
v1=$(make_package p1.tar.zst one)
v2=$(make_package p2.tar.zst two)
v3=$(make_package p3.tar.zst three)
[ "$v1" != "$v2" ] || fail "two provenances gave one id"
id=$(pipeline_tool publish "$REG" chat p1.tar.zst) || fail "publish failed"
[ "$id" = "$v1" ] || fail "publish returned $id, the package is $v1"
[ -f "$REG/chat/versions/$v1/package.tar.zst" ] && [ -f "$REG/chat/versions/$v1/MANIFEST.json" ] || fail "version folder incomplete"
[ "$(sha256sum <"$REG/chat/versions/$v1/MANIFEST.json" | cut -d' ' -f1)" = "$v1" ] || fail "MANIFEST.json does not hash to the id"
# Publishing the same package again: a no-op success, no audit line.
pipeline_tool publish "$REG" chat p1.tar.zst >/dev/null || fail "republishing failed"
[ "$(pipeline_tool check "$REG" chat)" = 1 ] || fail "republishing was recorded"
# Other content under an existing id is refused (here: a version folder whose manifest was edited).
pipeline_tool publish "$REG" chat p2.tar.zst >/dev/null || fail "publish v2 failed"
chmod u+w "$REG/chat/versions/$v2/MANIFEST.json"
echo ' ' >>"$REG/chat/versions/$v2/MANIFEST.json"
pipeline_tool publish "$REG" chat p2.tar.zst >out 2>&1 && fail "a version with other content was replaced"
expect_contains out "refusing to replace a published version"
pipeline_tool check "$REG" chat >out 2>&1 && fail "check accepted a damaged version"
rm -rf "${REG:?}/chat/versions/$v2"
pipeline_tool publish "$REG" chat p2.tar.zst >/dev/null || fail "publish v2 failed"
pipeline_tool publish "$REG" chat p3.tar.zst >/dev/null || fail "publish v3 failed"
# A package that does not verify is not published.
head -c 300 p1.tar.zst >cut.tar.zst
pipeline_tool publish "$REG" chat cut.tar.zst >out 2>&1 && fail "a cut package was published"
# Promote and roll back.
pipeline_tool promote "$REG" chat "$v1" prod || fail "promote v1"
pipeline_tool promote "$REG" chat "${v2:0:12}" prod || fail "promote v2 by prefix"
pipeline_tool promote "$REG" chat "$v3" prod || fail "promote v3"
[ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v3" ] || fail "prod is not v3"
grep -q "\"previous\": \"$v2\"" "$REG/chat/channels/prod.json" || fail "prod.json does not name v2 as previous"
[ "$(pipeline_tool rollback "$REG" chat prod)" = "$v2" ] || fail "rollback did not give v2"
[ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v2" ] || fail "prod is not v2 after rollback"
[ "$(pipeline_tool rollback "$REG" chat prod)" = "$v1" ] || fail "second rollback did not give v1"
pipeline_tool rollback "$REG" chat prod >out 2>&1 && fail "rolled back past the first version"
expect_contains out "no previous version"
pipeline_tool promote "$REG" chat "$v3" prod || fail "promote v3 again"
pipeline_tool promote "$REG" chat "$v2" canary || fail "promote canary"
pipeline_tool promote "$REG" chat 0000000000 prod >out 2>&1 && fail "promoted a missing version"
expect_contains out "has no version"
pipeline_tool promote "$REG" chat "$v1" "$v1" >out 2>&1 && fail "a version id was accepted as a channel name"
pipeline_tool promote "$REG" ../x "$v1" prod >out 2>&1 && fail "a bad adapter name was accepted"
# publish 4 (v2 twice: its damaged folder was removed) + promote 5 + rollback 2 = 11 audit records, each whole, with who/when/action/from/to/why.
[ "$(pipeline_tool check "$REG" chat)" = 11 ] || fail "audit records: $(pipeline_tool check "$REG" chat)"
grep -c '"action": "rollback"\|"action":"rollback"' "$REG/chat/audit.jsonl" | grep -qx 2 || fail "rollback lines"
head -1 "$REG/chat/audit.jsonl" | grep -q '"who"' || fail "audit lines lack who"
# Routes (in the ftl binary) and fetch, below; first the library's view through resolve.
[ "$(pipeline_tool resolve "$REG" "chat@${v1:0:10}")" = "$v1" ] || fail "resolve by prefix"
pipeline_tool resolve "$REG" chat@nope >out 2>&1 && fail "resolved a missing channel"
expect_contains out "no channel or version nope"
# A version folder that is a symbolic link out of the registry is refused, naming the version,
# never followed (issue 32): resolve, promote and check; routes and fetch below.
mv "$REG/chat/versions/$v1" "$SCRATCH/outside-v1"
ln -s "$SCRATCH/outside-v1" "$REG/chat/versions/$v1"
pipeline_tool resolve "$REG" "chat@$v1" >out 2>&1 && fail "a version folder linked out of the registry was resolved"
expect_contains out "version ${v1:0:12} of chat: $REG/chat/versions/$v1 is a symbolic link or not a folder"
pipeline_tool promote "$REG" chat "$v1" linked >out 2>&1 && fail "a linked version folder was promoted"
expect_contains out "is a symbolic link"
pipeline_tool check "$REG" chat >out 2>&1 && fail "check accepted a linked version folder"
expect_contains out "is a symbolic link"
rm "$REG/chat/versions/$v1"
mv "$SCRATCH/outside-v1" "$REG/chat/versions/$v1"

# The same through `ftl` (skipped when this build's ftl lacks the pipeline's commands).
if ftl registry help >/dev/null 2>&1; then
  export FTL_REGISTRY=$REG
  run_ftl out registry ls
  expect_rc 0 out
  expect_contains out "chat"
  expect_contains out "$v3  [prod]"
  expect_contains out "prod -> ${v3:0:12} (previous ${v1:0:12})"
  run_ftl out registry --registry "$REG" ls chat
  expect_rc 0 out
  expect_contains out "$v2  [canary]"
  run_ftl out registry ls --registry "$SCRATCH/nothing-here" chat
  expect_rc 1 out
  expect_contains out "no adapter chat"
  run_ftl out registry routes
  expect_rc 0 out
  expect_contains out "chat@prod=$REG/chat/versions/$v3/adapter"
  expect_contains out "chat@canary=$REG/chat/versions/$v2/adapter"
  [ -f "$REG/chat/versions/$v3/adapter/adapter_model.safetensors" ] || fail "routes did not unpack"
  cmp "$REG/chat/versions/$v3/adapter/adapter_model.safetensors" export/adapter_model.safetensors || fail "unpacked differs"
  run_ftl out registry routes --channel canary
  expect_rc 0 out
  [ "$(wc -l <out)" = 1 ] || fail "routes --channel canary printed $(wc -l <out) lines"
  # prod's version folder linked out of the registry: not served from there.
  mv "$REG/chat/versions/$v3" "$SCRATCH/outside-v3"
  ln -s "$SCRATCH/outside-v3" "$REG/chat/versions/$v3"
  run_ftl out registry routes
  expect_rc 1 out
  expect_contains out "chat@prod: version ${v3:0:12} of chat: $REG/chat/versions/$v3 is a symbolic link"
  expect_contains out "chat@canary=$REG/chat/versions/$v2/adapter"
  run_ftl out registry fetch chat@prod linked
  expect_rc 1 out
  expect_contains out "is a symbolic link"
  [ -e linked ] && fail "fetch made linked/ from a linked version folder"
  rm "$REG/chat/versions/$v3"
  mv "$SCRATCH/outside-v3" "$REG/chat/versions/$v3"
  # An unpacked folder that was changed is noticed.
  chmod u+w "$REG/chat/versions/$v3/adapter/adapter_config.json"
  echo x >>"$REG/chat/versions/$v3/adapter/adapter_config.json"
  run_ftl out registry routes
  expect_rc 1 out
  expect_contains out "was changed after unpacking"
  rm -rf "${REG:?}/chat/versions/$v3/adapter"
  run_ftl out registry fetch chat@prod fetched
  expect_rc 0 out
  cmp fetched/adapter_model.safetensors export/adapter_model.safetensors || fail "fetched adapter differs"
  cmp fetched/verdict.json verdict.json || fail "fetched verdict differs"
  run_ftl out registry fetch "chat@$v1" fetched
  expect_rc 1 out
  expect_contains out "already exists"
  run_ftl out registry fetch "chat@$v1" fetched1
  expect_rc 0 out
  run_ftl out rollback chat --channel prod --why "bad answers"
  expect_rc 0 out
  [ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v1" ] || fail "ftl rollback did not restore v1"
  tail -1 "$REG/chat/audit.jsonl" | grep -q 'bad answers' || fail "the audit line lacks the why"
  run_ftl out promote chat "$v3" --to prod --why "fixed"
  expect_rc 0 out
  run_ftl out promote chat "$v3"
  expect_rc 2 out
  run_ftl out registry check chat
  expect_rc 0 out
  expect_contains out "consistent (13 audit records)"
  # Without $USER (cron, containers, `env -i`) the audit record names the effective user and the
  # host (the passwd name, else the uid), never "unknown".
  me="$(id -un)@$(hostname -s)"  # ftl_hostname: the name up to its first dot
  env -u USER ftl registry publish --unverified solo p1.tar.zst >out 2>&1 || { cat out; fail "publish without USER failed"; }
  tail -1 "$REG/solo/audit.jsonl" | grep -q "\"who\": *\"$me\"" ||
    fail "without USER the audit record does not name $me: $(tail -1 "$REG/solo/audit.jsonl")"
  # ftl export on a run directory: RUNDIR/final -> RUNDIR/export (or -o).
  mkdir -p run && cp -r final run/final
  run_ftl out export run
  expect_rc 0 out
  cmp run/export/adapter_model.safetensors export/adapter_model.safetensors || fail "ftl export differs"
  run_ftl out export run -o elsewhere
  expect_rc 0 out
  cmp elsewhere/adapter_config.json export/adapter_config.json || fail "ftl export -o differs"
  rm run/final/COMMIT
  run_ftl out export run -o again
  expect_rc 1 out
  expect_contains out "no commit marker"
else
  echo "note: this build's ftl has no registry command; the CLI part was skipped"
fi
echo ok
