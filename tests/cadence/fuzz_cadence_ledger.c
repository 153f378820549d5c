/* tests/cadence/fuzz_cadence_ledger.c: libFuzzer harness for the ledger-line parser: arbitrary
 * bytes (a corrupt, torn or hostile ledger) split into lines as the loader splits them, each
 * parsed, and each record's cause classified. */
#include <stdint.h>
#include <string.h>

#include "ftl/cadence.h"
#include "ftl/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int quiet;
  if (!quiet) {
    ftl_log_set_level(FTL_LOG_ERROR);
    quiet = 1;
  }
  const char *p = (const char *)data;
  size_t pos = 0;
  while (pos < size) {
    const char *nl = memchr(p + pos, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - (p + pos)) : size - pos;
    ftl_cadence_record rec;
    ftl_diag d;
    if (ftl_cadence_parse_record(p + pos, len, &rec, &d) == FTL_OK) {
      /* The strings must be terminated and the class consistent with the cause. */
      if (strlen(rec.cause) >= sizeof rec.cause || strlen(rec.job) >= sizeof rec.job) __builtin_trap();
      if (rec.kind == FTL_CADENCE_REC_FAILURE && rec.cls != ftl_cadence_classify(rec.cause, rec.step)) __builtin_trap();
      if (rec.kind == FTL_CADENCE_REC_EXPOSURE && !(rec.rank_hours >= 0)) __builtin_trap();
    }
    pos += len + 1;
  }
  return 0;
}
