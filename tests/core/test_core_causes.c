/* tests/core/test_core_causes.c: the failure-cause table (core/failure_cause.h) is the one the
 * cadence classifies by: every cause in it is known to ftl_cadence_classify with its class, and a
 * name outside it is unknown. (The launcher's names are generated from the same table.) */
#include "core/failure_cause.h"
#include "ftl/cadence.h"
#include "ftl_test.h"

int main(void) {
  static const struct {
    const char *name;
    ftl_cadence_cause_class cls;
  } table[] = {
#define ROW_(kind, name, cls) {name, FTL_CADENCE_CAUSE_##cls},
      FTL_FAILURE_CAUSE_MAP(ROW_)
#undef ROW_
  };
  CHECK(sizeof table / sizeof table[0] >= 10);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    ftl_cadence_cause_class got = ftl_cadence_classify(table[i].name, 100);
    if (got != table[i].cls) fprintf(stderr, "cause %s\n", table[i].name);
    CHECK_INT_EQ(got, table[i].cls);
  }
  CHECK_INT_EQ(ftl_cadence_classify("exit_code", 100), FTL_CADENCE_CAUSE_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("exit_code", -1), FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("hang", 100), FTL_CADENCE_CAUSE_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("cannot_start", 100), FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("meteor", 100), FTL_CADENCE_CAUSE_UNKNOWN);
  CHECK_INT_EQ(ftl_cadence_classify(NULL, 100), FTL_CADENCE_CAUSE_UNKNOWN);
  return 0;
}
