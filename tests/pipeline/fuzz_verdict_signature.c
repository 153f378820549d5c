/* tests/pipeline/fuzz_verdict_signature.c: libFuzzer harness for the verdict signature reader
 * (pipeline/verdict_sign.h, docs/formats/verdict-signature.md): any input is refused with a message
 * (no key is trusted here, so nothing can verify) and never read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/verdict_sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pl_verdict_digests dg;
  char key_id[FTL_SHA256_HEX_LEN + 1];
  ftl_diag d = {{0}};
  memset(dg.verdict, 'a', FTL_SHA256_HEX_LEN);
  memset(dg.config, 'b', FTL_SHA256_HEX_LEN);
  memset(dg.model, 'c', FTL_SHA256_HEX_LEN);
  dg.verdict[FTL_SHA256_HEX_LEN] = dg.config[FTL_SHA256_HEX_LEN] = dg.model[FTL_SHA256_HEX_LEN] = '\0';
  if (pl_verdict_verify("/nonexistent-ftl-trusted-keys", (const char *)data, size, &dg, key_id, &d) == FTL_OK) abort();
  if (!d.msg[0]) abort();
  return 0;
}
