# Command-line mistakes say what was meant (docs/cli.md): a program given where a job spec belongs
# (the `--` forgotten) exits 2 with the command to type; `ftl help bogus` exits 2 with the usage;
# a run directory that cannot be written exits 5 naming the path and the system's reason.
. "$(dirname "$0")/lib.sh" || exit 1
run_ftl nodash.out run -n 4 /bin/true
expect_rc 2 nodash.out
expect_contains nodash.out "ftl run: /bin/true is not a job spec (it is an executable); to run a program use: ftl run -n 4 -- /bin/true"
grep -q "YAML" nodash.out && fail "/bin/true was read as YAML"
run_ftl nodash2.out run -n 2 sh -c "echo hi"
expect_rc 2 nodash2.out
expect_contains nodash2.out "ftl run: sh is not a job spec (a spec comes alone); to run a program use: ftl run -n 2 -- sh -c echo hi"
printf 'just some notes\n' > notes.txt
run_ftl notes.out run notes.txt
expect_rc 2 notes.out
expect_contains notes.out "ftl run: notes.txt:1:1: expected a mapping of job fields at the top level, got a string 'just some notes'"
expect_contains notes.out "ftl run: notes.txt is not a job spec (it does not read as one); to run a program use: ftl run -n N -- notes.txt"
[ ! -d runs ] || fail "a run directory was made for a command-line mistake"

run_ftl help.out help bogus
expect_rc 2 help.out
expect_contains help.out "ftl help: no command or topic 'bogus'"
expect_contains help.out "usage: ftl run [OPTIONS] JOB.yaml"

# A run directory under a regular file: ENOTDIR.
: > afile
run_ftl notdir.out run -n 1 --run-dir afile/run -- /bin/true
expect_rc 5 notdir.out
expect_contains notdir.out "ftl run: cannot write the run directory afile/run: cannot create folder afile/run: Not a directory"
# Under a read-only file system: EROFS (root ignores permission bits, so a read-only mount it is).
mkdir ro
if mount -t tmpfs -o ro,size=1m tmpfs ro 2>/dev/null; then
  trap 'umount "$SCRATCH/ro" 2>/dev/null; pkill -KILL -f "$MARKER" 2>/dev/null; remove_scratch' EXIT
  run_ftl rofs.out run -n 1 --run-dir ro/run -- /bin/true
  umount ro
  expect_rc 5 rofs.out
  expect_contains rofs.out "ftl run: cannot write the run directory ro/run: cannot create folder ro/run: Read-only file system"
else
  echo "note: mounting a read-only tmpfs is not permitted here; the EROFS case was not run"
fi
echo "ok"
