/* launcher/gpu_watch.c: a host's GPUs watched by its first rank agent, told to the launcher when a
 * verdict changes (launcher/gpu_watch.h). */
#include "launcher/gpu_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/gpu_health.h"

#define WATCH_MAX_GPUS 64

struct ln_gpu_watch {
  ln_gpu_sampler *sampler;
  ln_gpu_health_limits limits;
  ln_gpu_reading prev[WATCH_MAX_GPUS], cur[WATCH_MAX_GPUS];
  int n_prev;
  /* what the launcher was last told, per GPU: its verdict and reason */
  ln_gpu_verdict said[WATCH_MAX_GPUS];
  int n_said;
};

ftl_err ln_gpu_watch_open(ln_gpu_watch **out, ftl_diag *d) {
  *out = NULL;
  ln_gpu_watch *w = ftl_calloc(1, sizeof *w);
  if (!w) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = ln_gpu_sampler_open(&w->sampler, d);
  if (rc) {
    ftl_free(w);
    return rc;
  }
  w->limits = ln_gpu_health_limits_default();
  *out = w;
  return FTL_OK;
}

int64_t ln_gpu_watch_interval_ms(void) {
  int64_t ms;
  if (ftl_parse_i64(getenv("FTL_GPU_HEALTH_MS"), 100, 3600000, &ms) == FTL_OK) return ms;
  return 5000;
}

json_t *ln_gpu_watch_pass(ln_gpu_watch *w) {
  if (!w || !ln_gpu_sampler_available(w->sampler)) return NULL;
  int n = 0;
  ln_gpu_sampler_read(w->sampler, w->cur, WATCH_MAX_GPUS, &n);
  if (n <= 0) return NULL;
  int changed = n != w->n_said;
  ln_gpu_verdict v[WATCH_MAX_GPUS];
  for (int i = 0; i < n; i++) {
    /* The first pass judges a GPU on its own (what it already carries: an uncorrectable error, a
     * pending remap); later ones against the GPU's previous reading (what rose since). */
    const ln_gpu_reading *prev = i < w->n_prev ? &w->prev[i] : NULL;
    ln_gpu_verdict_of(prev, &w->cur[i], &w->limits, &v[i]);
    if (i >= w->n_said || v[i].kind != w->said[i].kind || strcmp(v[i].reason, w->said[i].reason) != 0) changed = 1;
  }
  memcpy(w->prev, w->cur, (size_t)n * sizeof *w->cur);
  w->n_prev = n;
  if (!changed) return NULL;
  json_t *gpus = json_array();
  for (int i = 0; i < n && gpus; i++) {
    const ln_gpu_reading *r = &w->cur[i];
    json_array_append_new(gpus, json_pack("{s:i, s:s, s:s, s:s, s:s}", "index", r->index, "uuid", r->uuid, "name",
                                          r->name, "verdict", ln_gpu_verdict_name(v[i].kind), "reason", v[i].reason));
  }
  memcpy(w->said, v, (size_t)n * sizeof *v);
  w->n_said = n;
  return gpus ? json_pack("{s:s, s:o}", "type", "gpu_health", "gpus", gpus) : NULL;
}

void ln_gpu_watch_close(ln_gpu_watch *w) {
  if (!w) return;
  ln_gpu_sampler_close(w->sampler);
  ftl_free(w);
}
