/* tests/launcher/emit_threads.c: several threads of each rank send events to the launcher at once
 * (as the checkpoint writer does beside the training loop) while the main thread reports steps.
 * Every event must arrive whole: the test counts them in events.jsonl. Run under TSan too. */
#include <pthread.h>
#include <stdio.h>

#include "ftl/ftl.h"

enum { THREADS = 4, EVENTS_PER_THREAD = 50 };

static ftl_ctx *ctx;

static void *emitter(void *arg) {
  int id = (int)(long)arg;
  for (int i = 0; i < EVENTS_PER_THREAD; i++) {
    char fields[96];
    snprintf(fields, sizeof fields, "{\"thread\":%d,\"seq\":%d}", id, i);
    if (ftl_ctx_emit_event(ctx, "test_threaded", fields) != FTL_OK) return (void *)1;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (ftl_init(&argc, &argv, &ctx) != FTL_OK) {
    fprintf(stderr, "ftl_init: %s\n", ftl_ctx_errmsg(ctx));
    ftl_finalize(ctx);
    return 1;
  }
  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, emitter, (void *)t);
  for (int64_t step = 1; step <= 200; step++) ftl_step_done(ctx, step);
  int failed = 0;
  for (int t = 0; t < THREADS; t++) {
    void *ret = NULL;
    pthread_join(threads[t], &ret);
    failed |= ret != NULL;
  }
  int rc = ftl_barrier(ctx, 60000);
  ftl_finalize(ctx);
  return failed || rc ? 1 : 0;
}
