/* tests/pipeline/fuzz_registry_channel.c: libFuzzer harness for the registry's channel pointer
 * parser (pipeline/registry.h): any input is refused with a message or gives well-formed ids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char cur[FTL_SHA256_HEX_LEN + 1], prev[FTL_SHA256_HEX_LEN + 1];
  ftl_diag d = {{0}};
  if (pl_registry_channel_parse((const char *)data, size, cur, prev, &d) == FTL_OK) {
    if (!pl_sha256_is_hex(cur)) abort();
    if (prev[0] && !pl_sha256_is_hex(prev)) abort();
  } else if (!d.msg[0]) {
    abort();
  }
  return 0;
}
