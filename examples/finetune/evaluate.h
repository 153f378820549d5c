/* examples/finetune/evaluate.h: the task's metrics on a data set: mean cross-entropy of the
 * answer bytes (nats per byte) and exact-match accuracy (every answer byte is the model's most
 * likely byte given the correct prefix, which is the same as greedy decoding reproducing the
 * whole answer). Shared by the training program (end-of-run report) and ftl-finetune-eval. */
#ifndef FTL_EXAMPLES_FINETUNE_EVALUATE_H
#define FTL_EXAMPLES_FINETUNE_EVALUATE_H

#include <stdint.h>

#include "data.h"
#include "model.h"

/* Sums over examples (summable across ranks). */
typedef struct ft_metrics {
  double loss_sum; /* nats over scored positions */
  double scored;   /* scored positions */
  double exact;    /* examples answered exactly */
  double examples;
} ft_metrics;

/* Adds the metrics of examples [begin, end) of d to *m, evaluated with lora (NULL: the base
 * alone) in batches of acts' capacity max_b. 0 or -1 (out of memory). */
int ft_evaluate(const ft_params *p, const ft_lora *lora, const ft_data *d, int64_t begin, int64_t end, int max_b,
                ft_acts *acts, ft_metrics *m);

static inline double ft_metrics_loss(const ft_metrics *m) { return m->scored > 0 ? m->loss_sum / m->scored : 0.0; }
static inline double ft_metrics_accuracy(const ft_metrics *m) { return m->examples > 0 ? m->exact / m->examples : 0.0; }

#endif
