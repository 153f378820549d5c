# tests/pipeline/lib.sh: shared set-up of the pipeline's script tests: the launcher tests' helpers
# (scratch folder, PATH, fail, expect_*), a final adapter made by the example's writer, its PEFT
# export, a passing verdict, and a package of it (pipeline_tool, tests/pipeline/pipeline_tool.c).
. "$FTL_SOURCE_DIR/tests/launcher/lib.sh" || exit 1
pipeline_tool make-final final 5 || fail "make-final failed"
pipeline_tool export final export || fail "export failed"
printf '{"passed": true, "version": 1, "metric": "exact_match", "value": 0.9}\n' >verdict.json
# make_package OUT TAG: a package of the same adapter with provenance {"tag": TAG}; prints the id.
make_package() {
  pipeline_tool package export verdict.json "$1" "$2" || fail "package $1 failed"
}

# use_registry: skips the test (77) when this build's ftl has no registry command; else $REG, a
# registry in the scratch folder, is the one ftl and its children use (FTL_REGISTRY).
use_registry() {
  ftl registry help >/dev/null 2>&1 || { echo "skipped: this build's ftl has no registry command"; exit 77; }
  REG=$SCRATCH/registry
  export FTL_REGISTRY=$REG
}

# fault_sweep MAX CMD SPEC WANT: the fault tests' sweep. For N = 1, 2, ... up to MAX (in $FAULT_N),
# `fault_try CMD FAULT` runs CMD under FTL_FAULT=FAULT (SPEC with N for the N) until a run succeeds,
# which `fault_done CMD FAULT` checks: the fault lay beyond the command's last call, so the command
# did all of its work. `fault_failed CMD FAULT WANT` checks each failed run. The test defines the
# three, and fails when the command still fails at N = MAX or fewer than two runs reached the fault.
fault_sweep() {
  local max=$1 cmd=$2 spec=$3 want=$4 failed=0 fs
  FAULT_N=1
  while [ "$FAULT_N" -le "$max" ]; do
    fs=${spec/N/$FAULT_N}
    if fault_try "$cmd" "$fs"; then
      fault_done "$cmd" "$fs"
      break
    fi
    failed=$((failed + 1))
    fault_failed "$cmd" "$fs" "$want"
    FAULT_N=$((FAULT_N + 1))
  done
  [ "$FAULT_N" -le "$max" ] || fail "$cmd $spec: still failing at N = $max"
  [ $failed -ge 2 ] || fail "$cmd $spec: only $failed runs reached the fault"
  echo "$cmd $spec: $failed failing runs checked"
}
