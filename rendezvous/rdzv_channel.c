/* rendezvous/rdzv_channel.c: the rank's channel to the launcher after start-up (include/ftl/rdzv.h):
 * heartbeats with the sampled compute time and the model FLOPs so far (ftl_step_done,
 * ftl_step_done_flops), progress reports and sections, events,
 * and the launcher's stop requests, agreed across the gang.
 *
 * Not here: the rendezvous at start-up (rdzv_init.c), the wire format (wire.c). */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rendezvous/rz_internal.h"

/* Reads what the launcher sent since last time, without waiting. False once the connection is
 * closed or broken. */
static bool poll_launcher(ftl_ctx *ctx) {
  if (!ctx->have_client || ctx->client.fd < 0) return false;
  bool eof = false;
  if (rz_linebuf_fill(&ctx->from_launcher, ctx->client.fd, &eof) != FTL_OK) return false;
  json_t *msg = NULL;
  ftl_diag ignored;
  while (rz_linebuf_next(&ctx->from_launcher, &msg, &ignored) == FTL_OK) {
    if (!strcmp(rz_wire_str(msg, "type", ""), "stop")) {
      ctx->stop_requested = 1;
      snprintf(ctx->stop_reason, sizeof ctx->stop_reason, "%s", rz_wire_str(msg, "reason", "stop requested"));
    }
    json_decref(msg);
  }
  /* A launcher that closed the connection is gone: the rank agent ends this program. */
  return !eof;
}

/* Another rank heard a stop this rank has not yet read: the launcher sends every rank the same
 * message at once, so it is on its way. Waiting a little for it lets every rank report the real
 * reason (a preemption, say) instead of a second-hand one; the wait is bounded, since a stop that
 * came from one rank's own signal handler reaches no other rank. */
#define STOP_REASON_WAIT_MS 250

static void await_stop_message(ftl_ctx *ctx) {
  if (!ctx->have_client || ctx->client.fd < 0) return;
  int64_t deadline = ftl_clock_ms() + STOP_REASON_WAIT_MS;
  while (!ctx->stop_requested) {
    int64_t left = deadline - ftl_clock_ms();
    if (left <= 0) return;
    struct pollfd pfd = {.fd = ctx->client.fd, .events = POLLIN};
    int n = poll(&pfd, 1, (int)left);
    if (n <= 0 || !(pfd.revents & POLLIN) || !poll_launcher(ctx)) return;
  }
}

ftl_err ftl_stop_requested(ftl_ctx *ctx, int *stop_out, const char **reason_out) {
  ftl_diag d; /* written only on an error (see allreduce_impl) */
  *stop_out = 0;
  if (reason_out) *reason_out = "";
  if (!ctx->have_comm) return rz_ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_stop_requested before ftl_init succeeded"), &d);
  (void)poll_launcher(ctx);
  int local = ctx->stop_requested, any = 0;
  ftl_err rc = ftl_mpi_check(ftl_mpi()->allreduce(&local, &any, 1, MPI_INT, MPI_MAX, ctx->comm), "MPI_Allreduce (stop)", &d);
  if (rc) return rz_ctx_fail(ctx, rc, &d);
  if (any && !ctx->stop_requested) await_stop_message(ctx);
  if (any && !ctx->stop_reason[0]) snprintf(ctx->stop_reason, sizeof ctx->stop_reason, "another rank was asked to stop");
  *stop_out = any;
  if (reason_out) *reason_out = ctx->stop_reason;
  return FTL_OK;
}

int ftl_stop_pending(ftl_ctx *ctx, const char **reason_out) {
  (void)poll_launcher(ctx);
  if (reason_out) *reason_out = ctx->stop_reason;
  return ctx->stop_requested;
}

ftl_err ftl_progress_section(ftl_ctx *ctx, const char *section) {
  if (!ctx->have_client) return FTL_OK;
  ftl_diag ignored;
  return rz_rdzv_client_send(&ctx->client, json_pack("{s:s, s:s}", "type", "section", "name", section), 0, &ignored);
}

ftl_err ftl_step_done(ftl_ctx *ctx, int64_t step) {
  if (!ctx->have_client) return FTL_OK;
  ftl_diag ignored;
  if (ctx->sampling) {
    /* The sampled step just ended: its time less its collectives is this rank's compute. */
    ctx->compute_ms = (double)(ftl_clock_ns() - ctx->sample_t0_ns - ctx->collective_ns) / 1e6;
    ctx->sampling = 0;
  }
  if (!ctx->first_step_reported) {
    ctx->first_step_reported = 1;
    ctx->last_progress_ms = ftl_clock_ms();
    ctx->compute_ms = -1;
    ctx->sampling = 1;
    ctx->sample_t0_ns = ftl_clock_ns();
    ctx->collective_ns = 0;
    return rz_rdzv_client_send(&ctx->client,
                                rz_with_flops(ctx, json_pack("{s:s, s:I, s:f}", "type", "first_step", "step",
                                                             (json_int_t)step, "first_step_ms",
                                                             rz_ms_since(ctx->ready_ns))),
                                0, &ignored);
  }
  int64_t now = ftl_clock_ms();
  if (now - ctx->last_progress_ms < FTL_PROGRESS_INTERVAL_MS) return FTL_OK;
  ctx->last_progress_ms = now;
  double compute_ms = ctx->compute_ms;
  /* Sample the next step. */
  ctx->sampling = 1;
  ctx->collective_ns = 0;
  ctx->sample_t0_ns = ftl_clock_ns();
  /* A heartbeat that does not fit in the socket is dropped: the next one says the same, later. */
  ftl_err rc = rz_rdzv_client_send(
      &ctx->client,
      rz_with_flops(ctx, json_pack("{s:s, s:I, s:f}", "type", "step", "step", (json_int_t)step, "compute_ms", compute_ms)),
      1, &ignored);
  return rc == FTL_ERR_TIMEOUT ? FTL_OK : rc;
}

ftl_err ftl_step_done_flops(ftl_ctx *ctx, int64_t step, double flops) {
  ftl_diag d;
  /* Checked before anything is counted: one NaN would poison the running total for good. */
  if (!(isfinite(flops) && flops >= 0)) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_step_done_flops: step %lld: flops must be a finite number >= 0, got %g",
                  (long long)step, flops);
    return ctx ? rz_ctx_fail(ctx, FTL_ERR_INVAL, &d) : FTL_ERR_INVAL;
  }
  if (!ctx) return FTL_ERR_INVAL;
  ctx->flops_total += flops;
  ctx->flops_ms = rz_ms_since(ctx->ready_ns);
  ctx->have_flops = 1;
  return ftl_step_done(ctx, step);
}

ftl_err ftl_progress_report(ftl_ctx *ctx, int64_t step, int64_t total_steps, double loss, int64_t tokens) {
  if (!ctx || !ctx->have_client || ctx->info.rank != 0) return FTL_OK;
  int64_t now = ftl_clock_ms();
  int last = total_steps > 0 && step >= total_steps;
  if (ctx->have_report && !last && now - ctx->last_report_ms < FTL_PROGRESS_REPORT_INTERVAL_MS) return FTL_OK;
  /* Tokens per second between two reports of this process; the first report has no rate yet. */
  double tps = -1;
  if (ctx->have_report && now > ctx->last_report_ms && tokens >= ctx->last_report_tokens)
    tps = (double)(tokens - ctx->last_report_tokens) * 1000.0 / (double)(now - ctx->last_report_ms);
  ctx->have_report = 1;
  ctx->last_report_ms = now;
  ctx->last_report_tokens = tokens;
  /* NaN and infinities are not JSON: a diverged loss is sent as null. */
  json_t *jl = isfinite(loss) ? json_real(loss) : json_null();
  ftl_diag ignored;
  /* The heartbeat message (wire version 2 adds these fields): it also counts as progress for the
   * hang detector. Dropped when the socket is full, like any heartbeat. */
  ftl_err rc = rz_rdzv_client_send(&ctx->client,
                                    json_pack("{s:s, s:I, s:I, s:o, s:I, s:f}", "type", "step", "step", (json_int_t)step,
                                              "total_steps", (json_int_t)total_steps, "loss", jl, "tokens",
                                              (json_int_t)tokens, "tokens_per_s", tps),
                                    1, &ignored);
  return rc == FTL_ERR_TIMEOUT ? FTL_OK : rc;
}

ftl_err ftl_ctx_emit_event(ftl_ctx *ctx, const char *event, const char *fields_json) {
  ftl_diag d = {{0}};
  json_t *fields = NULL;
  if (fields_json) {
    json_error_t jerr;
    fields = json_loads(fields_json, 0, &jerr);
    if (!json_is_object(fields)) {
      json_decref(fields);
      return ftl_diag_fail(&d, FTL_ERR_INVAL, "event fields are not a JSON object: %s", jerr.text);
    }
  }
  if (!ctx->have_client) {
    FTL_LOG(FTL_LOG_DEBUG, "event", "%s %s", event, fields_json ? fields_json : "{}");
    json_decref(fields);
    return FTL_OK;
  }
  json_t *msg = json_pack("{s:s, s:s, s:o}", "type", "event", "event", event, "fields", fields ? fields : json_object());
  return rz_rdzv_client_send(&ctx->client, msg, 0, &d);
}
