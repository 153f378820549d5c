/* tests/ckpt/fuzz_manifest.c: libFuzzer harness for the manifest parser (outside bytes: a
 * manifest on a shared file system can be anything). A parsed manifest is serialised again and
 * must parse to the same text (the writer and the parser agree on every accepted input). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"
#include "checkpoint/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ck_manifest *m = NULL, *m2 = NULL;
  ftl_diag d;
  char *t1 = NULL, *t2 = NULL;
  size_t l1 = 0, l2 = 0;
  if (ck_manifest_parse((const char *)data, size, &m, &d) != FTL_OK) return 0;
  if (ck_manifest_to_json(m, &t1, &l1, &d) == FTL_OK) {
    if (ck_manifest_parse(t1, l1, &m2, &d) != FTL_OK) abort();
    if (ck_manifest_to_json(m2, &t2, &l2, &d) != FTL_OK || l1 != l2 || memcmp(t1, t2, l1) != 0) abort();
  }
  ftl_free(t1);
  ftl_free(t2);
  ck_manifest_free(m);
  ck_manifest_free(m2);
  return 0;
}
