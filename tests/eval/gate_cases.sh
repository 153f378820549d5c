# The gate's outcomes with an evaluator whose behaviour a file selects (fake_eval.sh), on one
# trained run: pass (inclusive threshold), below, NaN, missing metric -> 1; unreadable metrics,
# a crashed evaluator, the deadline -> 2 (naming it); the evaluator's environment is built, not
# inherited; --json; min_gain against the adapter in the baseline channel.
. "$(dirname "$0")/lib.sh" || exit 1
FAKE="$FTL_SOURCE_DIR/tests/eval/fake_eval.sh"
echo "value:0.95" >mode
write_job cases.yaml gcases "$(fake_eval "$FAKE" 2 'env: {EVAL_SETTING: "7"}' "min_gain: 0.01")" 'path: reg'
export FTL_TEST_NOT_FOR_THE_EVALUATOR=secret
run_ftl out1 run --run-dir rc cases.yaml
expect_rc 0 out1
expect_contains out1 "gate passed: score 0.95"
expect_contains out1 "published gcases"
env_file=rc/gate/metrics.json.env
expect_contains "$env_file" "FTL_SNAPSHOT=$SCRATCH/rc/snapshot.json"
expect_contains "$env_file" "FTL_INPUT_HELDOUT=$SCRATCH/data/heldout.txt"
expect_contains "$env_file" "EVAL_SETTING=7"
grep -q FTL_TEST_NOT_FOR_THE_EVALUATOR "$env_file" && fail "the evaluator inherited ftl's environment"
grep -q '^RANK=' "$env_file" && fail "the evaluator got a rank's environment"

gate() { # gate MODE EXPECTED_RC TEXT
  echo "$1" >mode
  run_ftl "out.$1" gate rc
  expect_rc "$2" "out.$1"
  expect_contains "out.$1" "$3"
}
# min_gain 0.01 over the candidate (published above with 0.95).
gate value:0.955 1 "gain +0.005 over the candidate"
gate value:0.96 0 "gate passed: score 0.96"
gate value:0.5 1 "score 0.5 is below the threshold 0.9"
expect_contains rc/verdict.json '"passed": false'
gate nan 1 "score is not finite"
gate missing 1 "score is missing"
gate garbage 2 "not JSON"
[ ! -f rc/verdict.json ] || fail "an evaluator error left a verdict"
gate crash 2 "exited 3"
start=$(date +%s)
gate sleep 2 "passed its deadline (eval.timeout_s = 2 s)"
[ $(($(date +%s) - start)) -lt 15 ] || fail "the deadline did not stop the evaluator in time"
echo "value:0.99" >mode
ftl gate rc --json >verdict.out 2>gate.err || fail "ftl gate --json failed: $(cat gate.err)"
python3 -c 'import json,sys; v=json.load(open("verdict.out")); sys.exit(0 if v["passed"] and v["value"]==0.99 and v["baseline"]["channel"]=="candidate" else 1)' ||
  fail "ftl gate --json did not print the verdict"
expect_no_leftovers
echo "ok"
