# Two processes publish and promote into one registry at the same time, 20 rounds each (every
# round: publish its own new version, point `prod` at it; every 5th round also roll `prod` back).
# Afterwards the registry is consistent: 40 complete versions, every channel pointer names one,
# no temporary folder left, and the audit log has exactly 40 + 40 + 8 whole lines.
. "$FTL_SOURCE_DIR/tests/pipeline/lib.sh" || exit 1
REG=$SCRATCH/registry
ROUNDS=20
for w in 0 1; do
  for i in $(seq 1 $ROUNDS); do make_package "p$w-$i.tar.zst" "w$w-r$i" >/dev/null; done
done
worker() {
  local w=$1 id
  for i in $(seq 1 $ROUNDS); do
    id=$(pipeline_tool publish "$REG" chat "p$w-$i.tar.zst") || { echo "worker $w: publish $i failed" >&2; return 1; }
    pipeline_tool promote "$REG" chat "$id" prod || { echo "worker $w: promote $i failed" >&2; return 1; }
    if [ $((i % 5)) -eq 0 ]; then
      pipeline_tool rollback "$REG" chat prod >/dev/null || { echo "worker $w: rollback $i failed" >&2; return 1; }
    fi
  done
}
worker 0 >w0.out 2>&1 &
p0=$!
worker 1 >w1.out 2>&1 &
p1=$!
wait $p0 || { cat w0.out >&2; fail "worker 0 failed"; }
wait $p1 || { cat w1.out >&2; fail "worker 1 failed"; }
n=$(pipeline_tool check "$REG" chat) || fail "the registry is inconsistent: $n"
[ "$n" = $((2 * ROUNDS + 2 * ROUNDS + 2 * ROUNDS / 5)) ] || fail "audit records: $n, expected $((2 * ROUNDS + 2 * ROUNDS + 2 * ROUNDS / 5))"
[ "$(ls "$REG/chat/versions" | grep -c '^[0-9a-f]\{64\}$')" = $((2 * ROUNDS)) ] || fail "versions: $(ls "$REG/chat/versions" | wc -l)"
ls -a "$REG/chat/versions" | grep -q '^\.tmp-' && fail "a temporary version folder was left"
# Every line is one whole JSON object (check parsed them); and each names who, when and what.
[ "$(grep -c '^{"version":1,"time":"[^"]*","time_us":[0-9]*,"who":"pipeline_tool","action":"[a-z]*",.*}$' \
  "$REG/chat/audit.jsonl")" = "$n" ] || fail "audit lines are not all whole records"
id=$(pipeline_tool resolve "$REG" chat@prod) || fail "prod does not resolve"
pipeline_tool unpack "$REG/chat/versions/$id/package.tar.zst" - >/dev/null || fail "prod's package does not verify"
echo ok
