/* rendezvous/rz_internal.h: what the three files of the in-rank gang API (include/ftl/rdzv.h) share:
 * the context and three small helpers, inline so that no file of the three calls another. Private
 * to rendezvous/rdzv_*.c; nothing else includes it.
 *
 * The files and their one job each:
 *   rdzv_init.c     ftl_init (launcher rendezvous, MPI, the communicator), ftl_finalize, accessors
 *   rdzv_coll.c     the gang's collectives: allreduce (NCCL, MPI, staged), barrier, broadcast
 *   rdzv_channel.c  the launcher channel after start-up: heartbeats, progress, events, stop requests
 */
#ifndef FTL_RENDEZVOUS_RZ_INTERNAL_H
#define FTL_RENDEZVOUS_RZ_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <string.h>

#include "ftl/core.h"
#include "ftl/rdzv.h"
#include "rendezvous/client.h"
#include "rendezvous/gpu_seam.h"
#include "rendezvous/mpi_seam.h"
#include "rendezvous/wire.h"

/* Heartbeats to the launcher are rate-limited: each one wakes the launcher, which on a busy node
 * takes the rank's core for a moment. 250 ms keeps that well under 1% of step time and is fine
 * against hang timeouts of seconds (the hang detector's latency is the timeout + this). */
#define FTL_PROGRESS_INTERVAL_MS 250
/* Progress reports (loss, tokens) are written to the run's event log by the launcher: at most one
 * a second keeps that log small on long runs whatever the program's logging interval. */
#define FTL_PROGRESS_REPORT_INTERVAL_MS 1000
/* Default deadline of one collective (FTL_COLLECTIVE_TIMEOUT_MS overrides). */
#define FTL_DEFAULT_COLLECTIVE_TIMEOUT_MS (10 * 60 * 1000)

struct ftl_ctx {
  ftl_info info;
  ftl_startup_ms startup;
  core_launch_env env;
  rz_rdzv_client client;
  int have_client;
  MPI_Comm comm;      /* dup of MPI_COMM_WORLD: ftl's traffic never mixes with the program's */
  int have_comm;
  int mpi_owned;      /* ftl_init initialised MPI, so ftl_finalize finalises it */
  rz_gpu_comm *gpu;
  int local_gpus;     /* GPUs this rank saw: device buffers are possible, so their kind is checked */
  void *stage_event;  /* MPI path with device buffers: orders the staging copies (created lazily) */
  char *stage;        /* ... and the host bytes they go through */
  size_t stage_bytes;
  /* After a CUDA or NCCL error in a collective the communicator is aborted and the context is
   * broken: every later collective returns FTL_ERR_STATE naming this first error. */
  int broken;
  char broken_msg[1100]; /* the error name and the diag text */
  int64_t collective_timeout_ms;
  int64_t ready_ns;   /* end of start-up: the first step's clock starts here */
  int64_t last_progress_ms;
  int64_t last_report_ms;    /* ftl_progress_report: the last report sent (-1: none yet) */
  int64_t last_report_tokens;
  int have_report;
  int first_step_reported;
  /* For the launcher's straggler detector: the rank's own compute time in one sampled step, told
   * apart from waiting for others by timing the collectives of that step only. One step per
   * heartbeat is sampled, so other steps' collectives pay no clock reads (a read is ~25 ns, a few
   * per cent of a small allreduce). */
  int sampling;
  int64_t sample_t0_ns;
  int64_t collective_ns;
  double compute_ms;
  /* Model FLOPs (ftl_step_done_flops): the running total and when (ms since ready_ns, this rank's
   * own clock) the step that brought it there ended; the launcher takes rates from differences of
   * two such pairs of one rank, so neither the heartbeats' throttle nor a relay's batching blurs
   * them. have_flops: some step reported FLOPs (a program that reports none sends no field). */
  double flops_total;
  double flops_ms;
  int have_flops;
  pthread_mutex_t err_lock;
  ftl_diag diag;
  rz_linebuf from_launcher; /* messages the launcher sends after "go" (stop requests) */
  int stop_requested;        /* this rank heard "stop" */
  char stop_reason[256];
};

/* Keeps detail as the context's last error (ftl_ctx_errmsg); returns err. */
static inline ftl_err rz_ctx_fail(ftl_ctx *ctx, ftl_err err, const ftl_diag *detail) {
  pthread_mutex_lock(&ctx->err_lock);
  memcpy(&ctx->diag, detail, sizeof ctx->diag);
  pthread_mutex_unlock(&ctx->err_lock);
  return err;
}

static inline double rz_ms_since(int64_t t0_ns) { return (double)(ftl_clock_ns() - t0_ns) / 1e6; }

/* Adds the rank's model FLOPs so far ("flops", "flops_ms": docs/formats/rendezvous-wire.md) to msg
 * (a first_step, step or bye) when the program reported any; returns msg. */
static inline json_t *rz_with_flops(const ftl_ctx *ctx, json_t *msg) {
  if (msg && ctx->have_flops) {
    json_object_set_new(msg, "flops", json_real(ctx->flops_total));
    json_object_set_new(msg, "flops_ms", json_real(ctx->flops_ms));
  }
  return msg;
}

/* Sends msg (consumed) to the launcher when there is one. */
static inline void rz_report(ftl_ctx *ctx, json_t *msg) {
  if (!ctx->have_client) {
    json_decref(msg);
    return;
  }
  ftl_diag ignored;
  /* A launcher that went away is noticed by the launcher's own bookkeeping, not here: a failed
   * report must not fail the training step. */
  rz_rdzv_client_send(&ctx->client, msg, 0, &ignored);
}

#endif
