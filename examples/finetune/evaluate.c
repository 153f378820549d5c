/* examples/finetune/evaluate.c: held-out metrics (evaluate.h). */
#include "evaluate.h"

#include "ftl/core.h"

int ft_evaluate(const ft_params *p, const ft_lora *lora, const ft_data *d, int64_t begin, int64_t end, int max_b,
                ft_acts *acts, ft_metrics *m) {
  int T = ft_data_seq_len(d);
  int *tok = ftl_malloc((size_t)max_b * T * sizeof(int)), *tgt = ftl_malloc((size_t)max_b * T * sizeof(int));
  int32_t *idx = ftl_malloc((size_t)max_b * sizeof(int32_t));
  int rc = -1;
  if (!tok || !tgt || !idx) goto out;
  for (int64_t i = begin; i < end; i += max_b) {
    int b = (int)(end - i < max_b ? end - i : max_b);
    for (int k = 0; k < b; k++)
      idx[k] = (int32_t)(i + k);
    ft_data_fill(d, idx, b, 1, tok, tgt);
    ft_forward(p, lora, tok, tgt, b, T, acts, NULL);
    for (int k = 0; k < b; k++) {
      double loss;
      int scored, exact;
      ft_sequence_metrics(acts, k, &loss, &scored, &exact);
      m->loss_sum += loss;
      m->scored += scored;
      m->exact += exact;
      m->examples += 1;
    }
  }
  rc = 0;
out:
  ftl_free(tok);
  ftl_free(tgt);
  ftl_free(idx);
  return rc;
}
