# A real process SIGKILLed at each crash point inside publish and promote (FTL_CRASH_AT, core/fs.h):
# afterwards the registry never points at a missing or partial version (`check` passes, `prod`
# still resolves to a complete version), and a retry succeeds and leaves the audit log complete.
# A move is recorded before its pointer is written (docs/formats/registry.md, "Audit log"): a crash
# after the line and before the pointer leaves a pending move that the retry cancels with an
# "abort" line before it moves the channel itself, so those points end with 6 lines, not 4.
# Also a fetch killed before its rename leaves no target folder, and its retry works.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
v1=$(make_package p1.tar.zst one)
v2=$(make_package p2.tar.zst two)
for point in publish.version_write publish.before_rename publish.after_rename promote.before_audit \
  promote.after_audit promote.channel_write; do
  REG=$SCRATCH/reg-$point
  pipeline_tool publish "$REG" chat p1.tar.zst prod >/dev/null || fail "$point: baseline publish failed"
  FTL_CRASH_AT=$point pipeline_tool publish "$REG" chat p2.tar.zst prod >crash.out 2>&1
  rc=$?
  [ $rc -eq 137 ] || { cat crash.out >&2; fail "$point: expected a SIGKILL (137), got $rc"; }
  pipeline_tool check "$REG" chat >check.out 2>&1 || { cat check.out >&2; fail "$point: inconsistent after the crash"; }
  now=$(pipeline_tool resolve "$REG" chat@prod) || fail "$point: prod does not resolve"
  [ "$now" = "$v1" ] || [ "$now" = "$v2" ] || fail "$point: prod points at $now"
  pipeline_tool unpack "$REG/chat/versions/$now/package.tar.zst" - >/dev/null || fail "$point: prod's version is partial"
  # The retry.
  pipeline_tool publish "$REG" chat p2.tar.zst prod >/dev/null || fail "$point: retry failed"
  [ "$(pipeline_tool resolve "$REG" chat@prod)" = "$v2" ] || fail "$point: prod is not v2 after the retry"
  n=$(pipeline_tool check "$REG" chat) || fail "$point: inconsistent after the retry"
  # publish v1, promote v1, publish v2, promote v2: one line each, whatever was interrupted; plus the
  # cancelled move and its abort when the crash came between a move's line and its pointer.
  want=4
  case $point in promote.after_audit | promote.channel_write) want=6 ;; esac
  [ "$n" = $want ] || { cat "$REG/chat/audit.jsonl" >&2; fail "$point: $n audit records after the retry, expected $want"; }
  case $point in promote.after_audit | promote.channel_write)
    grep -c '"action":"abort"' "$REG/chat/audit.jsonl" | grep -qx 1 || fail "$point: no abort line for the cancelled move" ;;
  esac
  ls -a "$REG/chat/versions" | grep -q '^\.tmp-' && fail "$point: a temporary version folder was left"
  [ "$(pipeline_tool rollback "$REG" chat prod)" = "$v1" ] || fail "$point: rollback after the retry"
  echo "crash at $point: consistent, retry ok"
done
# A fetch killed just before its rename.
if ftl registry help >/dev/null 2>&1; then
  REG=$SCRATCH/reg-publish.version_write
  FTL_CRASH_AT=package.unpack.rename ftl registry fetch --registry "$REG" chat@prod got >crash.out 2>&1
  [ $? -eq 137 ] || { cat crash.out >&2; fail "fetch: expected a SIGKILL"; }
  [ -e got ] && fail "fetch: the target exists after a crash before its rename"
  ftl registry fetch --registry "$REG" chat@prod got >/dev/null || fail "fetch retry failed"
  cmp got/adapter_model.safetensors export/adapter_model.safetensors || fail "fetched adapter differs"
fi
echo ok
