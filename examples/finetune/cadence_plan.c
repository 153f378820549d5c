/* examples/finetune/cadence_plan.c: the fine-tune's checkpoint cadence (see cadence_plan.h). */
#include "cadence_plan.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/cadence.h"

enum { FIRST_CHECKPOINT_STEPS = 10 };

struct ft_cadence_plan {
  ftl_ctx *ctx;
  ftl_cadence *cad;        /* rank 0 only */
  int64_t next_step;       /* the next checkpoint step, the same on every rank */
  int64_t timed_step;      /* the last checkpoint whose timing the controller has seen */
  int64_t last_interval;   /* to print a decision only when it changes */
  double pending_s;        /* step time not yet given to the controller */
  int64_t pending_steps;
  int64_t pin_steps;       /* > 0: pinned, and checkpoints fall on its multiples */
  int calibrated;          /* a checkpoint's timing was seen (on every rank alike) */
};

/* Rank 0: the controller's interval now, reported to the event log and, when it changed, printed. */
static int64_t decide(ft_cadence_plan *p, int64_t step) {
  ftl_cadence_decision dec;
  if (p->pending_steps > 0) {
    ftl_cadence_observe_steps(p->cad, p->pending_steps, p->pending_s);
    ftl_cadence_observe_exposure(p->cad, p->pending_s / 3600.0 * ftl_ctx_info(p->ctx)->world_size);
    p->pending_s = 0;
    p->pending_steps = 0;
  }
  if (ftl_cadence_decide(p->cad, &dec) != FTL_OK) return p->last_interval > 0 ? p->last_interval : 50;
  const char *why = ftl_cadence_explain(p->cad);
  json_t *fields = json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:s}", "step",
                             (json_int_t)step, "interval_steps", (json_int_t)dec.interval_steps, "optimum_steps",
                             (json_int_t)dec.optimum_steps, "daly_s", dec.daly_s, "stall_s", dec.stall_s, "durable_s",
                             dec.durable_s, "step_s", dec.step_s, "mtbf_h", dec.mtbf_h, "failures", dec.failures,
                             "rank_hours", dec.rank_hours, "waste", dec.waste, "pinned", dec.pinned, "explanation", why);
  char *text = fields ? json_dumps(fields, JSON_COMPACT) : NULL;
  if (text) ftl_ctx_emit_event(p->ctx, "cadence", text);
  free(text);
  json_decref(fields);
  if (dec.interval_steps != p->last_interval) {
    printf("cadence at step %" PRId64 ": %s\n", step, why);
    fflush(stdout);
  }
  p->last_interval = dec.interval_steps;
  return dec.interval_steps;
}

static ftl_err share_next(ft_cadence_plan *p, int64_t step) {
  int64_t next = 0;
  if (ftl_ctx_info(p->ctx)->rank == 0) {
    /* Until a step has been timed the controller cannot turn seconds into steps: the first
     * checkpoint then comes after FIRST_CHECKPOINT_STEPS, and measures the stall and W too. */
    int64_t interval = p->pending_steps == 0 && p->last_interval == 0 ? FIRST_CHECKPOINT_STEPS : decide(p, step);
    /* A pinned cadence keeps its checkpoints on multiples of N, also after a resume from an
     * emergency checkpoint (a preemption) that fell between them. */
    next = p->pin_steps > 0 ? (step / p->pin_steps + 1) * p->pin_steps : step + interval;
  }
  ftl_err rc = ftl_bcast_host(p->ctx, &next, sizeof next, 0);
  if (rc == FTL_OK) p->next_step = next;
  return rc;
}

ftl_err ft_plan_create(ftl_ctx *ctx, int64_t pin_steps, double pin_s, double fleet_rate, int64_t start_step,
                       ft_cadence_plan **out, char *msg, size_t msg_size) {
  ftl_err rc = FTL_OK;
  ftl_diag d = {{0}};
  ft_cadence_plan *p = ftl_calloc(1, sizeof *p);
  if (!p) return FTL_ERR_NOMEM;
  p->ctx = ctx;
  p->timed_step = -1;
  p->pin_steps = pin_steps;
  const ftl_info *me = ftl_ctx_info(ctx);
  int ok = 1;
  if (me->rank == 0) {
    ftl_cadence_config cfg;
    ftl_cadence_config_init(&cfg);
    cfg.world_size = me->world_size;
    cfg.pin_steps = pin_steps;
    cfg.pin_s = pin_s; /* every pin_s seconds of steps: the controller turns it into steps */
    cfg.fleet_rate = fleet_rate; /* 0: the controller's default */
    /* The preemption notice bounds the interval: a save must fit in it (ftl exports the grace). */
    int64_t grace_ms = 0;
    if (ftl_parse_i64(getenv("FTL_PREEMPT_GRACE_MS"), 1, INT64_MAX / 4, &grace_ms) == FTL_OK)
      cfg.preempt_notice_s = (double)grace_ms / 1e3;
    ftl_cadence_load_stats run_stats, fleet_stats;
    if ((rc = ftl_cadence_create(&cfg, &p->cad, &d)) != FTL_OK ||
        (rc = ftl_cadence_load_from_env(p->cad, &run_stats, &fleet_stats, &d)) != FTL_OK) {
      snprintf(msg, msg_size, "cadence: %s", d.msg);
      ok = 0;
    }
  }
  /* Every rank learns whether rank 0 could set up, so all fail together or none does. */
  int all_ok = ok;
  rc = ftl_allreduce(ctx, &ok, &all_ok, 1, FTL_DTYPE_I32, FTL_OP_MIN);
  if (rc == FTL_OK && !all_ok) {
    if (me->rank != 0) snprintf(msg, msg_size, "cadence: rank 0 could not set up the controller");
    rc = FTL_ERR_STATE;
  }
  if (rc == FTL_OK) rc = share_next(p, start_step);
  if (rc) {
    ft_plan_destroy(p);
    return rc;
  }
  *out = p;
  return FTL_OK;
}

void ft_plan_step(ft_cadence_plan *p, double seconds) {
  if (!p->cad) return;
  p->pending_s += seconds;
  p->pending_steps++;
}

int ft_plan_due(const ft_cadence_plan *p, int64_t step) { return step >= p->next_step; }

int ft_plan_calibrating(const ft_cadence_plan *p) { return !p->calibrated; }

ftl_err ft_plan_after_checkpoint(ft_cadence_plan *p, int64_t step, int have_timing, int64_t timed_step,
                                 double stall_s, double durable_s) {
  if (p->cad && have_timing && timed_step > p->timed_step) {
    ftl_cadence_observe_checkpoint(p->cad, timed_step, stall_s, durable_s);
    p->timed_step = timed_step;
  }
  p->calibrated |= have_timing;
  return share_next(p, step);
}

void ft_plan_destroy(ft_cadence_plan *p) {
  if (!p) return;
  ftl_cadence_destroy(p->cad);
  ftl_free(p);
}
