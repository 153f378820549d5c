/* launcher/gpu_watch.h: a host's GPUs watched by its first rank agent (docs/gpu.md, "GPU health
 * (NVML)"): once before the rank starts, then every FTL_GPU_HEALTH_MS (default 5 s) from the
 * agent's alive thread. Each pass reads every GPU through the sampler (launcher/gpu_health.h) and
 * judges it against its previous reading; the launcher hears of it only when a GPU's verdict or
 * reason changed (and on the first pass), as {"type": "gpu_health", "gpus": [{"index", "uuid",
 * "name", "verdict", "reason"}]}: it logs the `gpu_health` event and ends the attempt on a failed
 * GPU (cause gpu_failed, launcher/supervise.c). No NVML or no GPU: nothing is said, nothing changes.
 * Not thread-safe: one thread at a time (the agent's main thread before the alive thread starts,
 * that thread after). */
#ifndef FTL_LAUNCHER_GPU_WATCH_H
#define FTL_LAUNCHER_GPU_WATCH_H

#include <jansson.h>
#include <stdint.h>

#include "ftl/error.h"

typedef struct ln_gpu_watch ln_gpu_watch;

/* Opens NVML (or the fake, FTL_NVML_FAKE). Only FTL_ERR_NOMEM fails; without NVML or GPUs the
 * watch is there and says nothing. */
ftl_err ln_gpu_watch_open(ln_gpu_watch **out, ftl_diag *d);
/* The milliseconds between passes (FTL_GPU_HEALTH_MS, 100 to 3600000; default 5000). */
int64_t ln_gpu_watch_interval_ms(void);
/* One pass: the message to send (a new reference) when a GPU's verdict or reason changed since the
 * last message, else NULL. */
json_t *ln_gpu_watch_pass(ln_gpu_watch *w);
void ln_gpu_watch_close(ln_gpu_watch *w);

#endif
