/* examples/finetune/cadence_plan.c: the fine-tune's checkpoint cadence (see cadence_plan.h). */
#include "cadence_plan.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/cadence.h"
#include "ftl/ckpt.h"

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
  int64_t pin_l3_every;    /* pinned: the multiples of this are saved at L3, the others below */
  int calibrated;          /* a checkpoint's timing was seen (on every rank alike) */
  int next_level;          /* FTL_CKPT_LEVEL_* of the checkpoint at next_step, the same on every rank */
  int levels;              /* rank 0: the controller plans per level (ftl_cadence_set_levels) */
  int low_level;           /* the lowest level the job has: L2 on several hosts with L2, else L1 */
  double durable_by_level[FTL_CADENCE_MAX_LEVELS]; /* rank 0: the newest W per level (-1: none yet) */
  int restart_counted;     /* rank 0, after a restart: the ledger's R of the restart that began this
                              attempt has been read (the launcher records it after the first step) */
  int restarts_loaded;     /* rank 0: the restart records the controller held at start */
};

/* Rank 0, in an attempt after a restart: the ledgers read again until they hold the restart that
 * began this attempt. The launcher measures R up to this attempt's first step, after the ranks
 * loaded the ledgers, so without this the whole attempt would plan with the R assumed before it.
 * Records already read are recognised and not counted twice (cadence/ledger.c). */
static void catch_up_restart(ft_cadence_plan *p) {
  if (p->restart_counted || ftl_ctx_info(p->ctx)->attempt <= 0) return;
  ftl_diag d = {{0}};
  int samples = 0;
  if (ftl_cadence_load_from_env(p->cad, NULL, NULL, &d) != FTL_OK) return;
  (void)ftl_cadence_restart_estimate(p->cad, NULL, &samples);
  p->restart_counted = samples > p->restarts_loaded;
}

/* The levels the checkpoint handle agreed (ftl_ckpt_levels: L1 when every rank has an L1 folder,
 * L2 with it when it is on; the same on every rank), and into *low the level a pinned checkpoint
 * below L3 goes to: the highest of them under L3 (L2 when on, else L1), L3 when there is none. */
static unsigned below_l3_level(unsigned set, int *low) {
  *low = set & FTL_CKPT_LEVEL_BIT(FTL_CKPT_LEVEL_L2)   ? FTL_CKPT_LEVEL_L2
         : set & FTL_CKPT_LEVEL_BIT(FTL_CKPT_LEVEL_L1) ? FTL_CKPT_LEVEL_L1
                                                       : FTL_CKPT_LEVEL_L3;
  return set;
}

/* Rank 0, derived with levels: the next checkpoint after `step` on the lowest level's grid and the
 * level ftl_cadence_due_level gives it. 0 when the controller has no per-level decision yet. */
static int64_t next_by_level(ft_cadence_plan *p, int64_t step, int *level) {
  ftl_cadence_level_decision ld;
  if (ftl_cadence_decide_levels(p->cad, &ld) != FTL_OK) return 0;
  int64_t base = 0;
  for (int l = FTL_CADENCE_LEVEL_L1; l <= FTL_CADENCE_MAX_LEVELS && base == 0; l++) base = ld.interval_steps[l - 1];
  if (base <= 0) return 0;
  int64_t next = (step / base + 1) * base;
  int due = FTL_CADENCE_LEVEL_NONE;
  if (ftl_cadence_due_level(p->cad, next, &due) != FTL_OK || due == FTL_CADENCE_LEVEL_NONE) return 0;
  *level = due;
  json_t *fields = json_pack("{s:I, s:I, s:i, s:I, s:I, s:I, s:f, s:f}", "step", (json_int_t)step, "next_step",
                             (json_int_t)next, "level", due, "l1_steps", (json_int_t)ld.interval_steps[0], "l2_steps",
                             (json_int_t)ld.interval_steps[1], "l3_steps", (json_int_t)ld.interval_steps[2], "waste",
                             ld.waste, "waste_single", ld.waste_single);
  char *text = fields ? json_dumps(fields, JSON_COMPACT) : NULL;
  if (text) ftl_ctx_emit_event(p->ctx, "cadence_levels", text);
  free(text);
  json_decref(fields);
  return next;
}

/* Rank 0: the controller's interval now, reported to the event log and, when it changed, printed. */
static int64_t decide(ft_cadence_plan *p, int64_t step) {
  ftl_cadence_decision dec;
  if (p->pending_steps > 0) {
    ftl_cadence_observe_steps(p->cad, p->pending_steps, p->pending_s);
    ftl_cadence_observe_exposure(p->cad, p->pending_s / 3600.0 * ftl_ctx_info(p->ctx)->world_size);
    p->pending_s = 0;
    p->pending_steps = 0;
  }
  catch_up_restart(p);
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
  int64_t next[2] = {0, FTL_CKPT_LEVEL_L3}; /* the step, its level */
  if (ftl_ctx_info(p->ctx)->rank == 0) {
    /* Until a step has been timed the controller cannot turn seconds into steps: the first
     * checkpoint then comes after FIRST_CHECKPOINT_STEPS, and measures the stall and W too. */
    int first = p->pending_steps == 0 && p->last_interval == 0;
    int64_t interval = first ? FIRST_CHECKPOINT_STEPS : decide(p, step);
    /* A pinned cadence keeps its checkpoints on multiples of N, also after a resume from an
     * emergency checkpoint (a preemption) that fell between them. */
    next[0] = p->pin_steps > 0 ? (step / p->pin_steps + 1) * p->pin_steps : step + interval;
    int level = FTL_CKPT_LEVEL_L3;
    int64_t by_level = !first && p->levels ? next_by_level(p, step, &level) : 0;
    if (by_level > 0) {
      next[0] = by_level;
      next[1] = level;
    } else if (p->pin_steps > 0 && p->pin_l3_every > 0) {
      next[1] = next[0] % p->pin_l3_every == 0 ? FTL_CKPT_LEVEL_L3 : p->low_level;
    }
  }
  ftl_err rc = ftl_bcast_host(p->ctx, next, sizeof next, 0);
  if (rc == FTL_OK) {
    p->next_step = next[0];
    p->next_level = (int)next[1];
  }
  return rc;
}

ftl_err ft_plan_create(ftl_ctx *ctx, unsigned ckpt_levels, int64_t pin_steps, int64_t pin_l3_every, double pin_s, double fleet_rate,
                       int64_t start_step, ft_cadence_plan **out, char *msg, size_t msg_size) {
  ftl_err rc = FTL_OK;
  ftl_diag d = {{0}};
  ft_cadence_plan *p = ftl_calloc(1, sizeof *p);
  if (!p) return FTL_ERR_NOMEM;
  p->ctx = ctx;
  p->timed_step = -1;
  p->pin_steps = pin_steps;
  p->pin_l3_every = pin_l3_every;
  p->next_level = FTL_CKPT_LEVEL_L3;
  for (int l = 0; l < FTL_CADENCE_MAX_LEVELS; l++) p->durable_by_level[l] = -1;
  const ftl_info *me = ftl_ctx_info(ctx);
  unsigned levels = below_l3_level(ckpt_levels, &p->low_level);
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
    if (ok) (void)ftl_cadence_restart_estimate(p->cad, NULL, &p->restarts_loaded);
    /* Derived, with levels below L3: one interval per level (docs/cadence.md "Multi-level
     * cadence"), each checkpoint's level from ftl_cadence_due_level. */
    ftl_cadence_levels_config lc;
    ftl_cadence_levels_config_init(&lc);
    lc.levels = levels;
    if (ok && pin_steps == 0 && pin_s <= 0 && levels != FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L3))
      p->levels = ftl_cadence_set_levels(p->cad, &lc) == FTL_OK;
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

int ft_plan_level(const ft_cadence_plan *p) { return p->next_level; }

ftl_err ft_plan_after_checkpoint(ft_cadence_plan *p, int64_t step, double save_s, int have_timing, int64_t timed_step,
                                 int timed_level, double stall_s, double durable_s) {
  if (p->cad && have_timing && timed_step > p->timed_step) {
    /* The single-level estimates learn from L3 checkpoints (what they model); each level's W is
     * kept for the next checkpoint of that level. */
    if (!p->levels || timed_level == FTL_CKPT_LEVEL_L3)
      ftl_cadence_observe_checkpoint(p->cad, timed_step, stall_s, durable_s);
    if (timed_level >= FTL_CKPT_LEVEL_L1 && timed_level <= FTL_CADENCE_MAX_LEVELS)
      p->durable_by_level[timed_level - 1] = durable_s;
    p->timed_step = timed_step;
  }
  /* The checkpoint just started counts at once for ftl_cadence_due_level (checkpoints since the last
   * one of each level), with the stall it just had and its level's newest W. */
  if (p->cad && p->levels && p->next_level >= FTL_CKPT_LEVEL_L1 && p->next_level <= FTL_CADENCE_MAX_LEVELS)
    ftl_cadence_observe_checkpoint_level(p->cad, p->next_level, save_s, p->durable_by_level[p->next_level - 1]);
  p->calibrated |= have_timing;
  return share_next(p, step);
}

void ft_plan_destroy(ft_cadence_plan *p) {
  if (!p) return;
  ftl_cadence_destroy(p->cad);
  ftl_free(p);
}
