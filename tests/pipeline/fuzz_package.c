/* tests/pipeline/fuzz_package.c: libFuzzer harness for the package reader (pipeline/package.h):
 * the MANIFEST.json parser on the raw input, and the whole reader (tar, optionally zstd, and the
 * seam's walks of the decompressed stream: pax records, end-of-archive, trailing bytes; and of
 * the zstd frames: skippable frames, bytes after the last frame) in verify-only mode. Any input is
 * refused with a message or accepted; nothing is written. The corpus holds a good package and the
 * forms tamper.py makes that the walks or the manifest's name rules refuse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/package.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ftl_diag d = {{0}};
  pl_package_manifest *m = NULL;
  pl_package_limits lim = {.max_total_bytes = 1 << 24};
  if (pl_package_manifest_parse(data, size, &lim, &m, &d) == FTL_OK) {
    for (size_t i = 1; i < m->n_files; i++)
      if (strcmp(m->files[i - 1].name, m->files[i].name) >= 0) abort();
    pl_package_manifest_free(m);
  } else if (!d.msg[0]) {
    abort();
  }
  char id[FTL_SHA256_HEX_LEN + 1];
  d.msg[0] = '\0';
  if (pl_package_verify_memory(data, size, &lim, id, &d) == FTL_OK) {
    if (!pl_sha256_is_hex(id)) abort();
  } else if (!d.msg[0]) {
    abort();
  }
  return 0;
}
