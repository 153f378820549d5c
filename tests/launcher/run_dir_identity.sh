# One run directory, one job (RUNDIR/job.json, docs/formats/job-identity.md): two scripts run by one
# interpreter get run directories of their own by default (named after the script, not the
# interpreter); a spec job is refused a command-line job's run directory and the other way round,
# naming both; the same command with other arguments is refused; a submission refused before
# anything started (an input that cannot be read) leaves nothing behind, so the corrected spec then
# runs; and a finished command-line job run again says so and starts nothing.
. "$(dirname "$0")/lib.sh" || exit 1
printf 'echo "this is a.sh"\n' >a.sh
printf 'echo "this is b.sh"\n' >b.sh

run_ftl a.out run -n 1 -- sh a.sh
expect_rc 0 a.out
run_ftl b.out run -n 1 -- sh b.sh
expect_rc 0 b.out
[ -f runs/a/job.json ] && [ -f runs/b/job.json ] || { ls -R runs >&2; fail "the two scripts did not get runs/a and runs/b"; }
[ ! -e runs/sh ] || fail "a script's run directory was named after its interpreter"
expect_contains runs/a/attempt-0000/rank-00000.out "this is a.sh"
expect_contains runs/b/attempt-0000/rank-00000.out "this is b.sh"
expect_contains runs/a/job.json '"command": "sh a.sh"'
expect_contains runs/a/job.json '"kind": "command"'
# An interpreter's options are passed over; inline code has no script, so the interpreter names it.
printf 'echo "this is c.sh"\n' >c.sh
run_ftl c.out run -n 1 -- sh -e c.sh
expect_rc 0 c.out
expect_contains runs/c/job.json '"command": "sh -e c.sh"'
run_ftl inline.out run -n 1 -- sh -c "echo inline"
expect_rc 0 inline.out
expect_contains runs/sh/job.json '"command": "sh -c echo inline"'

# The same program with other arguments: another job, refused; a finished one again: said, nothing run.
run_ftl a2.out run -n 1 --run-dir runs/a -- sh a.sh extra
expect_rc 2 a2.out
expect_contains a2.out "run directory $PWD/runs/a belongs to the command-line job 'a' (sh a.sh); this is the command-line job 'a' (sh a.sh extra)"
run_ftl again.out run -n 1 -- sh a.sh
expect_rc 0 again.out
expect_contains again.out "already finished: job 'a' trained to its end"
[ ! -d runs/a/attempt-0001 ] || { cat a.out again.out runs/a/events.jsonl >&2; fail "the rerun of a finished job started an attempt"; }

# A spec job into the command-line job's folder, and a command-line job into a spec job's.
cat >job.yaml <<YAML
name: a
ranks: 1
program: sh
args: ["b.sh"]
YAML
run_ftl spec.out run job.yaml
expect_rc 2 spec.out
expect_contains spec.out "belongs to the command-line job 'a' (sh a.sh); this is the job 'a' of spec job.yaml (spec hash "
run_ftl spec2.out run --run-dir runs/specjob job.yaml
expect_rc 0 spec2.out
run_ftl cli.out run -n 1 --run-dir runs/specjob -- sh b.sh
expect_rc 2 cli.out
expect_contains cli.out "belongs to the job 'a' of spec job.yaml (spec hash "
expect_contains cli.out "this is the command-line job 'b' (sh b.sh)"
[ ! -d runs/specjob/attempt-0001 ] || fail "a refused job started an attempt"

# A submission refused before anything started (an input that cannot be read): nothing is left,
# and the corrected spec runs in the same folder.
cat >bad.yaml <<YAML
name: inputs
ranks: 1
program: sh
args: ["a.sh"]
inputs:
  train: data/trian.txt
YAML
mkdir -p data
echo line >data/train.txt
run_ftl bad.out run bad.yaml
expect_rc 2 bad.out
expect_contains bad.out "input 'train': cannot read data/trian.txt"
[ ! -e runs/inputs ] || { ls -la runs/inputs >&2; fail "the refused submission left runs/inputs"; }
sed 's/trian.txt/train.txt/' bad.yaml >good.yaml
run_ftl good.out run good.yaml
expect_rc 0 good.out
expect_contains runs/inputs/attempt-0000/rank-00000.out "this is a.sh"
echo ok
