/* tests/launcher/flops_probe.c: a program that reports known model FLOPs at a known pace, for the
 * MFU tests (tests/launcher/mfu_run.sh; docs/gpu.md, "Useful work: MFU").
 *
 *   flops_probe --steps N --step-ms MS --flops F [--check-invalid] [--no-flops]
 *
 * Every rank: ftl_init, then N steps of MS milliseconds each (a sleep: the step's "compute"),
 * each reported with ftl_step_done_flops(ctx, step, F); rank 0 also reports progress every step
 * (ftl_progress_report: the `progress` events the test measures the step rate from). With
 * --check-invalid each rank first checks that a negative, NaN and infinite FLOPs count are
 * refused (FTL_ERR_INVAL, with a message naming the value) and prints "validation ok"; with
 * --no-flops the steps are reported with ftl_step_done (no FLOPs at all). Exits 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftl/ftl.h"

static int refused(ftl_ctx *ctx, double flops, const char *want) {
  ftl_err rc = ftl_step_done_flops(ctx, 0, flops);
  const char *msg = ftl_ctx_errmsg(ctx);
  if (rc != FTL_ERR_INVAL || !strstr(msg, "flops must be a finite number >= 0") || !strstr(msg, want)) {
    fprintf(stderr, "flops %g: expected FTL_ERR_INVAL naming '%s', got %s: %s\n", flops, want, ftl_strerror(rc), msg);
    return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  long steps = 10, step_ms = 100;
  double flops = 1e9;
  int check = 0, report_flops = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
    else if (!strcmp(argv[i], "--step-ms") && i + 1 < argc) step_ms = atol(argv[++i]);
    else if (!strcmp(argv[i], "--flops") && i + 1 < argc) flops = atof(argv[++i]);
    else if (!strcmp(argv[i], "--check-invalid")) check = 1;
    else if (!strcmp(argv[i], "--no-flops")) report_flops = 0;
  }
  ftl_ctx *ctx = NULL;
  if (ftl_init(&argc, &argv, &ctx) != FTL_OK) {
    fprintf(stderr, "ftl_init failed\n");
    return 1;
  }
  int rank = ftl_ctx_info(ctx)->rank;
  if (check) {
    if (!refused(ctx, -1.0, "-1") || !refused(ctx, NAN, "nan") || !refused(ctx, INFINITY, "inf") ||
        ftl_step_done_flops(NULL, 0, -1.0) != FTL_ERR_INVAL)
      return 1;
    printf("rank %d: validation ok\n", rank);
  }
  for (long s = 1; s <= steps; s++) {
    struct timespec ts = {step_ms / 1000, (step_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if ((report_flops ? ftl_step_done_flops(ctx, s, flops) : ftl_step_done(ctx, s)) != FTL_OK) {
      fprintf(stderr, "ftl_step_done_flops: %s\n", ftl_ctx_errmsg(ctx));
      return 1;
    }
    if (rank == 0) ftl_progress_report(ctx, s, steps, 1.0 / (double)s, s * 100);
  }
  ftl_finalize(ctx);
  return 0;
}
