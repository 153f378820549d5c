# A program that cannot start is found before anything is launched: exit 3, a clear message.
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl out run -n 2 -- no-such-program-ftl
expect_rc 3 out
expect_contains out "program 'no-such-program-ftl' was not found on PATH"
printf 'name: x\nranks: 2\nprogram: ./missing.sh\n' > job.yaml
run_ftl out2 run job.yaml
expect_rc 3 out2
expect_contains out2 "job.yaml: field 'program'"
echo "ok"
