# The spec's env is for the program, not for mpirun or the rank agent (docs/job-spec.md): with
# PATH=/nonexistent the job still launches and the rank sees PATH=/nonexistent and FOO=bar, and
# nothing of how the env travelled; a program named without '/' is looked up on the job's PATH.
. "$(dirname "$0")/lib.sh" || exit 1
cat > job.yaml <<YAML
ranks: 2
program: /bin/sh
args: ["-c", "echo \"path=\$PATH foo=\$FOO level=\$FTL_LOG_LEVEL carried=\${FTL_JOB_ENV_FOO-none} rank=\$RANK\"", "$MARKER"]
env: {PATH: /nonexistent, FOO: bar, FTL_LOG_LEVEL: warn}
run_dir: run
YAML
run_ftl out run job.yaml
expect_rc 0 out
for r in 0 1; do
  expect_contains run/attempt-0000/rank-0000$r.out "path=/nonexistent foo=bar level=warn carried=none rank=$r"
done

# A name without '/' is found on the job's PATH (and only there).
mkdir tools
printf '#!/bin/sh\necho "found on the job PATH: $PATH"\n' > tools/only-here
chmod +x tools/only-here
cat > job2.yaml <<YAML
ranks: 1
program: only-here
env: {PATH: "$SCRATCH/tools"}
run_dir: run2
YAML
run_ftl out2 run job2.yaml
expect_rc 0 out2
expect_contains run2/attempt-0000/rank-00000.out "found on the job PATH: $SCRATCH/tools"
# Without the job's PATH it is not found (exit 3, as any missing program).
printf 'ranks: 1\nprogram: only-here\nrun_dir: run3\n' > job3.yaml
run_ftl out3 run job3.yaml
expect_rc 3 out3
expect_contains out3 "program 'only-here' was not found on PATH"
expect_no_leftovers
echo "ok"
