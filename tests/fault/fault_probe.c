/* tests/fault/fault_probe.c: a rank program for the launcher's fault tests. It runs --steps steps of
 * --step-ms each, reporting progress, and misbehaves as told:
 *   --fail-rank R --fail-step S --fail-code C   rank R exits C at step S ...
 *   --fail-attempts A                            ... but only in attempts < A (default: every one)
 *   --fail-step-per-attempt                      ... at step S + attempt (progress each attempt)
 *   --stop-rank R --stop-step S                  rank R stops itself (SIGSTOP) at step S, once
 *   --slow-rank R --slow-ms X                    rank R computes X ms longer every step (a straggler)
 *   --until-file F                               every rank ends after the first step at whose end
 *                                                some rank saw F (a test that waits for an event
 *                                                touches F once it has seen it, so the job outlasts
 *                                                the event however slow the machine; --steps bounds it)
 * Its "checkpoint" is one line in RUNDIR/probe-step (rank 0 writes it on a stop request and every
 * --save-every steps; every rank reads it at start), enough to see that a relaunch resumes; the real
 * checkpoints are ftl_ckpt's and are tested with the example fine-tune. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/ftl.h"
#include "probe.h"

static int64_t read_saved_step(const char *run_dir) {
  char path[4096], *data = NULL;
  size_t size = 0;
  int64_t step = 0;
  ftl_diag d;
  if (!run_dir || ftl_fmt(path, sizeof path, "%s/probe-step", run_dir)) return 0;
  if (ftl_read_file(path, 64, &data, &size, &d) == FTL_OK) {
    data[strcspn(data, "\n")] = '\0';
    if (ftl_parse_i64(data, 0, INT64_MAX, &step) != FTL_OK) step = 0;
  }
  ftl_free(data);
  return step;
}

static void save_step(const char *run_dir, int64_t step) {
  char path[4096], text[32];
  ftl_diag d;
  if (!run_dir || ftl_fmt(path, sizeof path, "%s/probe-step", run_dir)) return;
  int n = snprintf(text, sizeof text, "%lld\n", (long long)step);
  if (ftl_write_file_atomic(path, text, (size_t)n, &d) != FTL_OK) fprintf(stderr, "probe: %s\n", d.msg);
}

int main(int argc, char **argv) {
  int64_t steps = 20, step_ms = 20, fail_rank = -1, fail_step = -1, fail_code = 3, fail_attempts = INT64_MAX;
  int64_t stop_rank = -1, stop_step = -1, save_every = 5, slow_rank = -1, slow_ms = 0;
  int per_attempt = 0;
  const char *until_file = probe_take_path(&argc, argv, "until-file");
  const probe_opt opts[] = {PROBE_NUM("steps", steps, 0, INT64_MAX),
                            PROBE_NUM("step-ms", step_ms, 0, INT64_MAX),
                            PROBE_NUM("fail-rank", fail_rank, 0, INT64_MAX),
                            PROBE_NUM("fail-step", fail_step, 0, INT64_MAX),
                            PROBE_NUM("fail-code", fail_code, 0, INT64_MAX),
                            PROBE_NUM("fail-attempts", fail_attempts, 0, INT64_MAX),
                            PROBE_FLAG("fail-step-per-attempt", per_attempt),
                            PROBE_NUM("stop-rank", stop_rank, 0, INT64_MAX),
                            PROBE_NUM("stop-step", stop_step, 0, INT64_MAX),
                            PROBE_NUM("save-every", save_every, 0, INT64_MAX),
                            PROBE_NUM("slow-rank", slow_rank, 0, INT64_MAX),
                            PROBE_NUM("slow-ms", slow_ms, 0, INT64_MAX)};
  if (probe_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof *opts))) return 2;
  ftl_ctx *ctx = probe_join("probe", &argc, &argv);
  if (!ctx) return 10;
  const ftl_info *me = ftl_ctx_info(ctx);
  int64_t start = read_saved_step(me->run_dir);
  if (me->rank == 0) printf("probe: attempt %d starts at step %lld of %lld\n", me->attempt, (long long)start, (long long)steps);
  int until_seen = 0;
  int64_t fail_at = fail_step + (per_attempt ? me->attempt : 0);
  for (int64_t step = start + 1; step <= steps; step++) {
    usleep((useconds_t)(step_ms + (me->rank == slow_rank ? slow_ms : 0)) * 1000);
    if (me->rank == fail_rank && step == fail_at && me->attempt < fail_attempts) {
      fprintf(stderr, "probe: rank %d failing at step %lld as told\n", me->rank, (long long)step);
      fflush(NULL);
      _exit((int)fail_code);
    }
    if (me->rank == stop_rank && step == stop_step && me->attempt == 0) raise(SIGSTOP);
    /* One allreduce a step: the ranks' count, and how many saw --until-file (so all end together). */
    struct stat st;
    float mine[2] = {1.0f, until_file && stat(until_file, &st) == 0 ? 1.0f : 0.0f}, sum[2] = {0.0f, 0.0f};
    if (ftl_allreduce(ctx, mine, sum, 2, FTL_DTYPE_F32, FTL_OP_SUM) != FTL_OK || sum[0] != (float)me->world_size) {
      fprintf(stderr, "probe: allreduce failed: %s\n", ftl_ctx_errmsg(ctx));
      ftl_finalize(ctx);
      return 11;
    }
    ftl_step_done(ctx, step);
    if (sum[1] > 0.0f) {
      if (me->rank == 0) printf("probe: %s is there: ending after step %lld\n", until_file, (long long)step);
      until_seen = 1;
      break;
    }
    if (me->rank == 0 && save_every > 0 && step % save_every == 0) save_step(me->run_dir, step);
    int stop = 0;
    const char *why = "";
    ftl_stop_requested(ctx, &stop, &why);
    if (stop) {
      if (me->rank == 0) {
        save_step(me->run_dir, step);
        printf("probe: %s: saved step %lld and stopping\n", why, (long long)step);
      }
      ftl_barrier(ctx, 30000);
      ftl_finalize(ctx);
      return 0;
    }
  }
  if (me->rank == 0 && !until_seen) printf("probe: finished %lld steps\n", (long long)steps);
  ftl_barrier(ctx, 60000);
  ftl_finalize(ctx);
  return 0;
}
