/* tests/pipeline/fuzz_safetensors.c: libFuzzer harness for the strict safetensors reader
 * (pipeline/safetensors.h): any input is refused with a message or accepted; an accepted file's
 * tensors lie inside the input, cover its data exactly, and re-encode to a file that parses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"
#include "pipeline/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pl_st_file *f = NULL;
  ftl_diag d = {{0}};
  pl_st_limits lim = {.max_header_bytes = 1 << 20, .max_tensors = 4096};
  if (pl_st_parse(data, size, &lim, &f, &d) != FTL_OK) {
    if (!d.msg[0]) abort(); /* a refusal always says why */
    return 0;
  }
  uint64_t total = 0;
  size_t n = pl_st_count(f);
  for (size_t i = 0; i < n; i++) {
    const pl_st_tensor *t = pl_st_at(f, i);
    const uint8_t *p = t->data;
    if (p < data || p + t->size_bytes > data + size) abort();
    total += t->size_bytes;
  }
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++)
    hl |= (uint64_t)data[i] << (8 * i);
  if (8 + hl + total != size) abort();
  /* Re-encode (canonical form) and parse again. */
  pl_st_tensor *t = calloc(n ? n : 1, sizeof *t);
  pl_st_kv *kv = calloc(pl_st_meta_count(f) + 1, sizeof *kv);
  for (size_t i = 0; i < n; i++)
    t[i] = *pl_st_at(f, i);
  for (size_t i = 0; i < pl_st_meta_count(f); i++)
    kv[i] = *pl_st_meta_at(f, i);
  uint8_t *img = NULL;
  size_t img_size = 0;
  if (pl_st_encode(t, n, kv, pl_st_meta_count(f), &img, &img_size, &d) == FTL_OK) {
    pl_st_file *g = NULL;
    if (pl_st_parse(img, img_size, NULL, &g, &d) != FTL_OK || pl_st_count(g) != n) abort();
    pl_st_free(g);
    ftl_free(img);
  } else if (n) {
    /* Only "__metadata__"-named tensors cannot be re-encoded, and the reader never yields one. */
    abort();
  }
  free(t);
  free(kv);
  pl_st_free(f);
  return 0;
}
