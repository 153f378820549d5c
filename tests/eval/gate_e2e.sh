# The main job end to end with the example's evaluator: snapshot -> train -> gate -> publish ->
# promote (ftl run exits 0 and `candidate` points at the version); a threshold that cannot be met
# (ftl run exits 1, the registry has no version, `ftl publish` refuses); a gate spec edited after
# submission (refused by `ftl gate --spec` and `ftl publish --spec`, naming the field); an edited
# snapshot record; a data file edited after submission (refused by the gate, publish and a
# relaunch, naming the file).
. "$(dirname "$0")/lib.sh" || exit 1

# The small configuration learns little in a few steps: the gate asks for a loss below the base
# model's (loss_gain, nats per answer byte).
write_job pass.yaml gpass "$EXAMPLE_EVAL
metric: loss_gain
direction: higher
threshold: 0.01" 'path: reg
channel: candidate'
run_ftl out1 run --run-dir r1 pass.yaml
expect_rc 0 out1
expect_contains out1 "hashing 3 inputs"
expect_contains out1 "gate passed: loss_gain"
expect_contains out1 "published gpass version"
expect_contains r1/verdict.json '"passed": true'
id=$(sed -n 's/.*published gpass version \([0-9a-f]\{64\}\).*/\1/p' out1)
[ -n "$id" ] || fail "no version id printed"
[ -f "reg/gpass/versions/$id/package.tar.zst" ] || fail "version $id is not in the registry"
grep -q "$id" reg/gpass/channels/candidate.json || fail "candidate does not point at $id"
# The provenance holds the run's facts as the launcher's fold of its event log tells them (handed to
# eval's publish through its hooks): one attempt, a committed step, a goodput. Publishing the same
# gated run again is the same version.
run_ftl out1j publish r1 --json
expect_rc 0 out1j
expect_contains out1j "\"version\": \"$id\""
expect_contains out1j '"attempts": 1,'
grep -qE '"last_checkpoint_step": [1-9][0-9]*' out1j || fail "the provenance names no committed step: $(cat out1j)"
grep -qE '"goodput_pct": [1-9]' out1j || fail "the provenance has no goodput: $(cat out1j)"
# The snapshot pins the data by SHA-256, and the verdict names the eval data and gate spec.
sha=$(sha256sum data/heldout.txt | cut -c1-64)
grep -q "$sha" r1/snapshot.json || fail "snapshot.json does not hold the SHA-256 of data/heldout.txt"
grep -q "$sha" r1/verdict.json || fail "verdict.json does not hold the SHA-256 of the eval data"
grep -q "$(sed -n 's/.*"gate_sha256": "\([0-9a-f]*\)".*/\1/p' r1/snapshot.json)" r1/verdict.json ||
  fail "verdict.json does not hold the locked gate's SHA-256"

# A threshold exact match cannot reach: the gate fails, nothing is published, ftl run exits 1.
write_job fail.yaml gfail "$EXAMPLE_EVAL
metric: exact_match
direction: higher
threshold: 1.01" 'path: reg2'
run_ftl out2 run --run-dir r2 fail.yaml
expect_rc 1 out2
expect_contains out2 "gate FAILED: exact_match"
expect_contains out2 "nothing published"
expect_contains r2/verdict.json '"passed": false'
[ -z "$(ls reg2/gfail/versions 2>/dev/null)" ] || fail "a failed gate published a version"
run_ftl out3 publish r2
expect_rc 1 out3
expect_contains out3 "did not pass"
[ -z "$(ls reg2/gfail/versions 2>/dev/null)" ] || fail "ftl publish published a failed run"

# The gate spec edited after submission: refused, naming the field.
sed 's/threshold: 0.01/threshold: 0.02/' pass.yaml >edited.yaml
run_ftl out4 gate r1 --spec edited.yaml
expect_rc 2 out4
expect_contains out4 "field 'eval.threshold' differs from the gate locked at submission"
run_ftl out5 publish r1 --spec edited.yaml
expect_rc 2 out5
expect_contains out5 "field 'eval.threshold'"
sed 's/channel: candidate/channel: prod/' pass.yaml >edited2.yaml
run_ftl out6 gate r1 --spec edited2.yaml
expect_rc 2 out6
expect_contains out6 "field 'registry.channel'"
run_ftl out7 gate r1 --spec pass.yaml --quiet
expect_rc 0 out7
# The record itself edited: its digest no longer matches.
cp r1/snapshot.json snapshot.bak
sed -i 's/"metric": "loss_gain"/"metric": "loss"/' r1/snapshot.json
run_ftl out8 gate r1
expect_rc 2 out8
expect_contains out8 "digest does not match"
cp snapshot.bak r1/snapshot.json

# A data file edited after submission: the gate, publish and a relaunch refuse it by name.
echo "abcdefgh>bcdefghi" >>data/heldout.txt
run_ftl out9 gate r1
expect_rc 2 out9
expect_contains out9 "input 'heldout' changed after submission"
expect_contains out9 "data/heldout.txt"
[ ! -f r1/verdict.json ] || grep -q '"passed": true' r1/verdict.json || fail "unexpected verdict"
run_ftl out10 publish r1
expect_rc 2 out10
expect_contains out10 "data/heldout.txt"
run_ftl out11 run --run-dir r1 pass.yaml
expect_rc 2 out11
expect_contains out11 "input 'heldout' changed after submission"
expect_no_leftovers
echo "ok"
