# Malformed job specs through the CLI: each one exits 2 with the file, line and field at fault,
# and starts nothing (no run directory is created).
. "$(dirname "$0")/lib.sh" || exit 1
check() { # name, expected text, spec...
  local name=$1 want=$2
  shift 2
  printf '%s\n' "$@" > "$name.yaml"
  run_ftl "$name.out" run "$name.yaml"
  expect_rc 2 "$name.out"
  expect_contains "$name.out" "$want"
  [ ! -d "runs/$name" ] || fail "$name: a run directory was created for a bad spec"
}
check unknown "unknown.yaml:3:1: field 'rankz'" "name: a" "program: ftl-allreduce-check" "rankz: 2"
check wrongtype "wrongtype.yaml:2:8: field 'ranks'" "program: ftl-allreduce-check" "ranks: four"
check noprogram "field 'program'" "name: a" "ranks: 2"
check zero "zero.yaml:1:8: field 'ranks'" "ranks: 0" "program: ftl-allreduce-check"
check negative "negative.yaml:1:8: field 'ranks'" "ranks: -3" "program: ftl-allreduce-check"
run_ftl missing.out run does-not-exist.yaml
expect_rc 2 missing.out
expect_contains missing.out "does-not-exist.yaml"
mkdir adir.yaml
run_ftl dir.out run adir.yaml
expect_rc 2 dir.out
expect_contains dir.out "adir.yaml"
run_ftl n0.out run -n 0 -- true
expect_rc 2 n0.out
expect_contains n0.out "-n"
echo "ok"
