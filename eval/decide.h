/* eval/decide.h: the gate's decision: the threshold (inclusive), then, with eval.min_gain, the gain
 * over the adapter in the baseline channel of the registry; and the same decision re-derived from
 * a verdict's recorded value, which `ftl publish` makes instead of trusting the verdict's `passed`.
 *
 * Not here: running the evaluator (eval/gate.c), the verdict's format (eval/verdict.h). */
#ifndef FTL_EVAL_DECIDE_H
#define FTL_EVAL_DECIDE_H

#include <jansson.h>
#include <stddef.h>

#include "ftl/error.h"
#include "pipeline/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The adapter in the gate's baseline channel and its value of the gate's metric (from the verdict
 * it was published with). present = 0 only when the registry is there and the channel has no
 * pointer at all (the adapter's first publish); a missing registry root, a pointer to a version that
 * is gone or a version without a readable verdict are errors. */
typedef struct ev_gate_baseline {
  int present;
  char channel[FTL_REGISTRY_NAME_MAX + 1];
  char version[65];
  int has_value; /* the baseline's verdict has a finite value of this metric */
  double value;
} ev_gate_baseline;
ftl_err ev_gate_find_baseline(const json_t *gate, ev_gate_baseline *b, ftl_diag *d);

/* The decision, from a canonical gate spec and a value: the threshold (inclusive), then, when
 * eval.min_gain is set and b is present, the gain over it. Returns passed (1) or not; the gain
 * into *gain_out (*has_gain set) and why it failed into reason. The gate and `ftl publish` (which
 * re-derives the verdict instead of trusting its `passed`) both decide here. */
int ev_gate_decide(const json_t *gate, int value_ok, double value, const ev_gate_baseline *b, double *gain_out,
                    int *has_gain, char *reason, size_t reason_size);

/* Re-derives a verdict from its recorded value and the registry's copy of the gate. FTL_OK when
 * it passes; FTL_ERR_STATE ("did not pass") when it does not; FTL_ERR_CORRUPT when the verdict's
 * own fields contradict the gate or the baseline moved since the gate ran. */
ftl_err ev_verdict_rederive(const json_t *gate, const json_t *verdict, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
