/* tests/eval/fuzz_metrics.c: libFuzzer harness for the evaluator's metrics file (outside bytes:
 * any program may be the evaluator). Any input is refused with a reason or accepted; an accepted
 * one answers every lookup without reading out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "eval/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ev_metrics *m = NULL;
  ftl_diag d = {{0}};
  if (ev_metrics_parse((const char *)data, size, &m, &d) != FTL_OK) {
    if (!d.msg[0]) abort(); /* a refusal always says why */
    return 0;
  }
  const char *key;
  json_t *value;
  double v;
  json_t *obj = (json_t *)(uintptr_t)ev_metrics_object(m); /* jansson's iterator takes a non-const object */
  json_object_foreach(obj, key, value) {
    ev_metric_state s = ev_metrics_get(m, key, &v);
    if (s == FTL_METRIC_MISSING) abort(); /* every listed key is found */
  }
  (void)ev_metrics_get(m, "exact_match", &v);
  ev_metrics_destroy(m);
  return 0;
}
