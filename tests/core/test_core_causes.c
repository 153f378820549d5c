/* tests/core/test_core_causes.c: the failure-cause table (core/failure_cause.h) is the one the
 * cadence classifies by: every cause in it is known to ftl_cadence_classify with its class, and a
 * name outside it is unknown. (The launcher's names are generated from the same table.) */
#include "core/failure_cause.h"
#include "core/failure_record.h"
#include "ftl/cadence.h"
#include "ftl_test.h"

int main(void) {
  /* The classes the table gives, in its order; the names, core's lookup of the same table
   * (test_core_failure_record checks those against the table). */
  static const ftl_cadence_cause_class want[] = {
#define CLASS_(kind, name, cls) FTL_CADENCE_CAUSE_##cls,
      FTL_FAILURE_CAUSE_MAP(CLASS_)
#undef CLASS_
  };
  const size_t n = sizeof want / sizeof want[0];
  CHECK(n >= 10);
  for (size_t i = 0; i < n; i++) {
    const char *name = core_failure_cause_name((int)i);
    CHECK(name != NULL);
    ftl_cadence_cause_class got = ftl_cadence_classify(name, 100);
    if (got != want[i]) fprintf(stderr, "cause %s\n", name);
    CHECK_INT_EQ(got, want[i]);
  }
  CHECK(core_failure_cause_name((int)n) == NULL);
  CHECK_INT_EQ(ftl_cadence_classify("exit_code", 100), FTL_CADENCE_CAUSE_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("exit_code", -1), FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("hang", 100), FTL_CADENCE_CAUSE_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("cannot_start", 100), FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK_INT_EQ(ftl_cadence_classify("meteor", 100), FTL_CADENCE_CAUSE_UNKNOWN);
  CHECK_INT_EQ(ftl_cadence_classify(NULL, 100), FTL_CADENCE_CAUSE_UNKNOWN);
  return 0;
}
