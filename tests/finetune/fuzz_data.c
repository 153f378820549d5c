/* tests/finetune/fuzz_data.c: libFuzzer harness for the data-file parser (outside bytes: the data
 * is an input of the job). Any input is refused with a message or accepted; an accepted one has
 * equal lines, each with an operator between letters and an answer, and fills sequences that stay
 * inside the byte vocabulary. */
#include <stdint.h>
#include <stdlib.h>

#include "data.h"
#include "ftl/core.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ft_data d;
  char msg[512];
  if (ft_data_parse((const char *)data, size, "fuzz", &d, msg, sizeof msg) != 0) {
    if (!msg[0]) abort();
    return 0;
  }
  if (d.n < 1 || (size_t)d.n * ((size_t)d.len + 1) != size) abort();
  int T = ft_data_seq_len(&d);
  int *tok = ftl_malloc((size_t)T * sizeof(int)), *tgt = ftl_malloc((size_t)T * sizeof(int));
  for (int64_t i = 0; tok && tgt && i < d.n && i < 64; i++) {
    if (d.op_at[i] < 1 || d.op_at[i] + 1 >= d.len) abort();
    int32_t idx = (int32_t)i;
    ft_data_fill(&d, &idx, 1, 1, tok, tgt);
    for (int t = 0; t < T; t++)
      if (tok[t] < 0 || tok[t] >= FT_VOCAB || tgt[t] >= FT_VOCAB || tgt[t] < -1) abort();
  }
  ftl_free(tok);
  ftl_free(tgt);
  ft_data_free(&d);
  return 0;
}
