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
