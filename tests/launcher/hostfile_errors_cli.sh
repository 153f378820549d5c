# Hostfiles are read by ftl, strictly, before anything starts (docs/formats/hostfile.md): a garbage
# line, an empty file and too few slots each exit 2 naming the file (and line), with no run
# directory made; a good hostfile with comments and blank lines runs.
. "$(dirname "$0")/lib.sh" || exit 1
refused() { # name, expected text, ftl run args...
  local name=$1 want=$2
  shift 2
  run_ftl "$name.out" run "$@" --run-dir "run-$name" -- /bin/sh -c "echo $MARKER"
  expect_rc 2 "$name.out"
  expect_contains "$name.out" "$want"
  [ ! -d "run-$name" ] || fail "$name: a run directory was made for a bad hostfile"
}
printf 'localhost slots=2\n@@@ garbage !!\n' > garbage.txt
refused garbage "ftl run: hostfile garbage.txt:2: expected a host name or address (then slots=N, max_slots=N), got '@@@'" \
  -n 2 --hostfile garbage.txt
printf 'localhost slots=2 cpus=4\n' > option.txt
refused option "hostfile option.txt:1: unknown option 'cpus=4' (expected slots=N or max_slots=N)" -n 2 --hostfile option.txt
: > empty.txt
refused empty "ftl run: hostfile empty.txt: names no host (the file is empty)" -n 2 --hostfile empty.txt
printf '# all commented\n# localhost slots=4\n\n' > comments-only.txt
refused comments "hostfile comments-only.txt: names no host (only blank lines and comments)" -n 2 --hostfile comments-only.txt
printf 'localhost slots=2\n' > few.txt
refused few "ftl run: hostfile few.txt holds 2 slots in all (1 host), fewer than the 4 ranks of the job" -n 4 --hostfile few.txt
refused missing "cannot read hostfile nope.txt: No such file or directory" -n 2 --hostfile nope.txt
# The spec's hostfile (relative to the spec's folder) is checked the same way.
mkdir spec
printf 'localhost\n' > spec/hosts.txt
printf 'ranks: 3\nprogram: /bin/true\nhostfile: hosts.txt\nrun_dir: run-spec\n' > spec/job.yaml
run_ftl spec.out run spec/job.yaml
expect_rc 2 spec.out
expect_contains spec.out "hostfile $SCRATCH/spec/hosts.txt holds 1 slot in all (1 host), fewer than the 3 ranks of the job"
[ ! -d run-spec ] || fail "a run directory was made for too few slots"

# A good one: comments, blank lines, max_slots.
printf '# the only host\n\nlocalhost slots=2 max_slots=4   # two ranks\n\n# end\n' > good.txt
run_ftl good.out run -n 2 --hostfile good.txt --run-dir run-good -- /bin/sh -c "echo rank=\$RANK $MARKER"
expect_rc 0 good.out
expect_contains run-good/attempt-0000/rank-00001.out "rank=1"
expect_contains run-good/attempt-0000/hostfile "localhost slots=2 max_slots=4"
expect_no_leftovers
echo "ok"
